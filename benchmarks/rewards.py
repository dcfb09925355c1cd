"""Runtime-verifiable rewards: each suite's checker as ``reward(trajectory, runtime) -> float``.

The benchmarks compute their scores with these, and the trainer can reuse them on its own
rollouts: everything a checker needs is in ``trajectory.meta`` (which suite, which task, the
captured calls) plus the final answer, read back from the runtime when one is given (the live
object, not its stored repr).

- ``data``:  the final answer against the generator's exact reference;
- ``bfcl``:  the captured calls through bfcl-eval's AST / multi-turn checker;
- ``tau2``:  the recorded simulation through tau2's evaluator (DB replay, actions, communicate).

``reward(trajectory, runtime)`` dispatches on ``trajectory.meta["suite"]``; ``REWARDS`` maps
suite names to the functions, and ``register_reward`` adds one.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from cave.runtimes.base import Runtime

from cave.registry import Registry
from cave.trajectory import Trajectory

RewardFn = Callable[[Trajectory, "Runtime | None"], float]
REWARDS: Registry[RewardFn] = Registry("benchmark reward")
register_reward = REWARDS.register  # @register_reward("suite"): the checker of trajectories with meta["suite"]


def reward(trajectory: Trajectory, runtime: Runtime | None = None) -> float:
    """The reward of ``trajectory`` by its suite's checker (``trajectory.meta["suite"]``)."""
    suite = trajectory.meta.get("suite")
    if suite not in REWARDS:
        known = ", ".join(sorted(REWARDS))
        raise KeyError(
            f"trajectory.meta['suite'] is {suite!r}; rewards exist for: {known} (set it when you build the run)"
        )
    return REWARDS.get(suite)(trajectory, runtime)


def final_answer(trajectory: Trajectory, runtime: Runtime | None) -> Any:
    """The live final answer when the runtime still holds it, else the trajectory's copy."""
    if runtime is not None:
        try:
            return runtime.retrieve("_final_answer")
        except Exception:  # no final_answer call, or a closed runtime
            pass
    return trajectory.final_answer


@register_reward("data")
def data_reward(trajectory: Trajectory, runtime: Runtime | None = None) -> float:
    """1.0 when the answer equals the reference of meta["data"] = {task, size, seed}; else 0.0."""
    from cave.benchmarks.data.tasks import TASKS, check

    info = trajectory.meta.get("data") or {}
    if info.get("task") not in TASKS:
        raise KeyError(f"trajectory.meta['data'] must name a data task ({', '.join(TASKS)}), got {info!r}")
    if trajectory.status == "context_overflow":
        return 0.0
    task = TASKS[info["task"]]
    ref = task.reference(int(info["size"]), int(info.get("seed", 0)))
    return 1.0 if check(final_answer(trajectory, runtime), ref, task.kind) else 0.0


@register_reward("bfcl")
def bfcl_reward(trajectory: Trajectory, runtime: Runtime | None = None) -> float:
    """1.0 when bfcl-eval's checker accepts the captured calls of meta["bfcl"] = {id, calls}."""
    from cave.benchmarks.bfcl.data import entry_by_id
    from cave.benchmarks.bfcl.score import score

    info = trajectory.meta.get("bfcl") or {}
    if "id" not in info or "calls" not in info:
        raise KeyError("trajectory.meta['bfcl'] needs 'id' and 'calls' (cave.benchmarks.bfcl.run records both)")
    return 1.0 if score(entry_by_id(info["id"]), info["calls"]).get("valid") else 0.0


@register_reward("tau2")
def tau2_reward(trajectory: Trajectory, runtime: Runtime | None = None) -> float:
    """tau2's evaluator on the recorded simulation of meta["tau2"] = {domain, task_id, termination, messages}."""
    from cave.benchmarks.tau2.agents import require_tau2

    require_tau2()
    from tau2.data_model.simulation import SimulationRun
    from tau2.evaluator.evaluator import EvaluationType, evaluate_simulation
    from tau2.run import get_tasks

    info = trajectory.meta.get("tau2") or {}
    if not info.get("messages"):
        return 0.0  # the simulation crashed before any message: tau2 scores it 0
    task = get_tasks(info["domain"], task_split_name=None, task_ids=[info["task_id"]])[0]
    sim = SimulationRun.model_validate(
        {
            "id": trajectory.run_id,
            "task_id": info["task_id"],
            "start_time": "",
            "end_time": "",
            "duration": 0.0,
            "termination_reason": info["termination"],
            "messages": info["messages"],
        }
    )
    result = evaluate_simulation(
        simulation=sim, task=task, evaluation_type=EvaluationType.ALL, solo_mode=False, domain=info["domain"]
    )
    return float(result.reward)
