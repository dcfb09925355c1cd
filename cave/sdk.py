"""The Python SDK: build agents from task files, run them, save what they produced.

    from cave import Agent, Runtime
    agent = Agent(model="local", runtime=Runtime("inprocess"))
    agent.runtime.inject("sales", df, description="one row per order")
    result = agent.run("Total revenue by region, as a DataFrame named by_region")
    agent.runtime.retrieve("by_region")          # the DataFrame itself

    from cave.sdk import run_task
    outcome = run_task("examples/sales/task.yaml")   # what `cave run` does, minus the display

The CLI is a thin layer over the functions below.
"""

from __future__ import annotations

import asyncio
import json
import time
from abc import ABCMeta
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from cave.agent import Agent, Event, RunResult
from cave.inputs import resolve_inputs
from cave.llm.base import LLM, Scripted, create_backend
from cave.runtimes.base import Runtime as BaseRuntime
from cave.runtimes.base import create_runtime
from cave.task import Task, TaskError, load_task
from cave.trajectory import Trajectory, jsonable

__all__ = [
    "Runtime",
    "SavedOutput",
    "TaskOutcome",
    "aresume",
    "arun_task",
    "build_agent",
    "build_backend",
    "build_runtime",
    "build_skills",
    "resume",
    "run_task",
    "save_outputs",
    "summarize",
    "write_value",
]


class _RuntimeMeta(ABCMeta):
    def __instancecheck__(cls, obj: object) -> bool:
        return isinstance(obj, BaseRuntime)

    def __subclasscheck__(cls, sub: type) -> bool:
        return issubclass(sub, BaseRuntime)


class Runtime(metaclass=_RuntimeMeta):
    """``Runtime("inprocess")`` or ``Runtime("kernel", timeout=30)``: a registered runtime by name.

    ``isinstance(x, Runtime)`` is true for every runtime (it checks ``cave.runtimes.base.Runtime``).
    """

    def __new__(cls, kind: str = "inprocess", **options: Any) -> BaseRuntime:  # type: ignore[misc]
        return create_runtime(kind, **options)


# -- building from a task file -------------------------------------------------------------------
def build_runtime(task: Task) -> BaseRuntime:
    """The task's runtime with its inputs injected (files as DataFrames, URLs as engines, callables)."""
    spec = task.spec.runtime
    options = dict(spec.options)
    for key in ("memory_limit_mb", "cpu_time_limit_s"):
        if getattr(spec, key) is not None:
            options[key] = getattr(spec, key)
    try:
        runtime = create_runtime(spec.kind, **options)
    except (TypeError, ValueError) as e:  # an option this runtime does not take, or cannot honour
        raise TaskError(
            [f"{task.where('runtime')}: runtime: {e}\n  fix: remove the options runtime {spec.kind!r} does not take"]
        ) from None
    except OSError as e:  # a folder it names cannot be made (workdir: a file, a path it may not write)
        raise TaskError(
            [
                f"{task.where('runtime')}: runtime: {type(e).__name__}: {e}\n  fix: give runtime options that name "
                "folders this user can create or use (workdir, transfer_dir)"
            ]
        ) from None
    try:
        _inject_inputs(task, runtime)
    except BaseException:
        runtime.close()  # a kernel must not outlive a run that never started
        raise
    return runtime


def _inject_inputs(task: Task, runtime: BaseRuntime) -> None:
    """The task's inputs into the runtime; one that the runtime cannot take (an engine a kernel cannot rebuild, a
    file it cannot see) is a TaskError at the input's line, like an input that does not load."""
    problems = []
    for name, (value, description) in resolve_inputs(task).items():
        try:
            if callable(value) and not isinstance(value, type):
                runtime.inject_function(value, description=description, name=name)
            else:
                runtime.inject(name, value, description)
        except Exception as e:
            problems.append(
                f"{task.where('inputs', name)}: inputs.{name}: runtime {task.spec.runtime.kind!r} cannot take this "
                f"input: {type(e).__name__}: {str(e).strip().splitlines()[0] if str(e).strip() else ''}\n"
                "  fix: give the input in a form that can be copied into the runtime's process (a file-backed "
                "database, a file the runtime can see), or use runtime: inprocess"
            )
    if problems:
        raise TaskError(problems)


def build_backend(task: Task) -> LLM:
    """The task's LLM backend. Scripted replies can be given inline (``replies:``) for model-free runs."""
    m = task.spec.model
    options = m.options
    if m.backend == "local" and task.spec.seed is not None:
        options.setdefault("seed", task.spec.seed)
    try:
        return create_backend(m.backend, **options)
    except TypeError as e:
        raise TaskError(
            [f"{task.where('model')}: model: {e}\n  fix: check the option names for backend {m.backend!r}"]
        ) from None


def build_skills(task: Task) -> Any:
    """The task's skills as a cave.skills.SkillSet: entries are folders (relative to the task) or skill names."""
    if not task.spec.skills and not task.spec.activate_skills:
        return None
    try:
        from cave import skills as skills_mod
    except ImportError as e:
        raise TaskError([f"{task.where('skills')}: skills: cave.skills is not available ({e})"]) from None
    folders, names = [], []
    for entry in task.spec.skills:
        path = task.base_dir / entry
        (folders if path.exists() else names).append(str(path) if path.exists() else entry)
    skillset = skills_mod.SkillSet(folders)
    wanted = set(names)
    for f in folders:  # everything found in a folder the task names is wanted too
        wanted |= {s.name for s in skillset if Path(s.path).resolve().is_relative_to(Path(f).resolve())}
    try:
        return skillset.select(sorted(wanted), activate=task.spec.activate_skills)
    except skills_mod.SkillError as e:
        raise TaskError([f"{task.where('skills')}: skills: {e}"]) from None


def build_agent(task: Task, *, llm: LLM | None = None, runtime: BaseRuntime | None = None) -> Agent:
    """An Agent for a task file (validated inputs first, then the model)."""
    own_runtime = runtime is None
    skills = build_skills(task)  # before the runtime: no input is loaded (no module imported) for a bad skill
    runtime = runtime or build_runtime(task)
    try:
        llm = llm or build_backend(task)
    except BaseException:
        if own_runtime:
            runtime.close()  # a kernel must not outlive a run that never started
        raise
    return Agent(
        model=llm,
        runtime=runtime,
        max_steps=task.spec.max_steps,
        max_tokens=task.spec.model.max_tokens,
        temperature=task.spec.model.temperature,
        seed=task.spec.seed,
        stop=task.spec.model.stop,
        timeout=task.spec.runtime.timeout,
        skills=skills,
        instructions=task.spec.instructions,
        checks=task.spec.checks,
        review=task.spec.review,
        verify=task.spec.verify,
        outputs=[out.variable or name for name, out in task.spec.outputs.items() if out.variable != "final_answer"],
        response_prefix=task.spec.model.response_prefix,
    )


# -- outputs -------------------------------------------------------------------------------------
@dataclass
class SavedOutput:
    name: str
    path: str | None = None
    error: str | None = None
    required: bool = True


def save_outputs(task: Task, agent: Agent, traj: Trajectory, out_dir: Path) -> list[SavedOutput]:
    """Retrieve each output from the runtime and write it: DataFrames to Parquet/CSV, the rest to JSON."""
    out_dir.mkdir(parents=True, exist_ok=True)
    saved = []
    for name, spec in task.spec.outputs.items():
        var = spec.variable or name
        try:
            if var == "final_answer":
                if traj.status not in ("success", "unverified"):
                    raise KeyError("the run did not call final_answer()")
                value = traj.final_answer
            else:
                value = agent.runtime.retrieve(var)
            path = write_value(value, out_dir / name, spec.format)
            saved.append(SavedOutput(name, str(path), required=spec.required))
        except Exception as e:
            msg = str(e.args[0]) if isinstance(e, KeyError) and e.args else f"{type(e).__name__}: {e}"
            saved.append(SavedOutput(name, None, msg, spec.required))
    return saved


def write_value(value: Any, stem: Path, fmt: str = "auto") -> Path:
    """Write ``value`` next to ``stem`` with the right suffix; returns the path written."""
    import pandas as pd

    if isinstance(value, pd.Series) and fmt in ("auto", "parquet", "csv"):
        value = value.to_frame()
    if fmt == "auto":
        fmt = "parquet" if isinstance(value, pd.DataFrame) else "json"
    path = stem.with_suffix("." + fmt if fmt != "pickle" else ".pkl")
    if fmt == "parquet":
        _dataframe(value).to_parquet(path)
    elif fmt == "csv":
        _dataframe(value).to_csv(path, index=not isinstance(value.index, pd.RangeIndex))
    elif fmt == "pickle":
        import cloudpickle

        path.write_bytes(cloudpickle.dumps(value))
    else:
        path.write_text(json.dumps(_to_json(value), indent=2, default=repr) + "\n", encoding="utf-8")
    return path


def _dataframe(value: Any) -> Any:
    import pandas as pd

    if not isinstance(value, pd.DataFrame):
        raise TypeError(f"a {type(value).__name__} cannot be saved as a table; use format: json")
    # Parquet needs string column names.
    return value.rename(columns=str) if not all(isinstance(c, str) for c in value.columns) else value


def _to_json(value: Any) -> Any:
    import numpy as np
    import pandas as pd

    if isinstance(value, pd.DataFrame):
        return json.loads(value.to_json(orient="records", date_format="iso"))
    if isinstance(value, pd.Series):
        return json.loads(value.to_json(date_format="iso"))
    if isinstance(value, np.generic):
        return value.item()
    if isinstance(value, np.ndarray):
        return value.tolist()
    if isinstance(value, dict):
        return {str(k): _to_json(v) for k, v in value.items()}
    if isinstance(value, list | tuple | set):
        return [_to_json(v) for v in value]
    return value if isinstance(value, str | int | float | bool | type(None)) else jsonable(value)


# -- running a task end to end -------------------------------------------------------------------
@dataclass
class TaskOutcome:
    result: RunResult
    outputs: list[SavedOutput] = field(default_factory=list)
    run_dir: Path | None = None
    summary: dict[str, Any] = field(default_factory=dict)
    agent: Agent | None = None  # still open: retrieve more from agent.runtime, then close it

    @property
    def ok(self) -> bool:
        return self.result.ok and not any(o.error and o.required for o in self.outputs)


async def arun_task(
    task: Task | str | Path,
    *,
    store: Any = True,
    on_event: Callable[[Event], None] | None = None,
    agent: Agent | None = None,
    resume: Trajectory | None = None,
) -> TaskOutcome:
    """Run a task file: build the agent, run it (recording to ``store``), save outputs and a summary.

    ``store``: True (the default) records the run in the default store, as ``cave run`` does (``cave runs
    list`` shows it, outputs land in its run folder); a ``cave.Store``; or None for no record."""
    if not isinstance(task, Task):
        task = load_task(task)
    if store is True:
        from cave.store import Store

        store = Store()
    agent = agent or build_agent(task)
    traj_box: dict[str, Trajectory] = {}

    def handle(ev: Event) -> None:
        from cave.agent import RunStarted

        if isinstance(ev, RunStarted):
            traj_box["t"] = ev.trajectory
            if store is not None and not ev.resumed:
                store.prepare(
                    ev.trajectory.run_id, task_path=str(task.path) if task.path else None, name=task.spec.name
                )
        if store is not None:
            store.on_event(ev)
        if on_event is not None:
            on_event(ev)

    try:
        result = await agent.arun(task.prompt(), on_event=handle, resume=resume)
    except (KeyboardInterrupt, asyncio.CancelledError):
        if store is not None and "t" in traj_box:
            store.mark(traj_box["t"].run_id, "interrupted", error="interrupted by the user")
        raise
    run_dir = store.run_dir(result.run_id) if store is not None else None
    outputs = save_outputs(task, agent, result.trajectory, run_dir / "outputs") if run_dir else []
    outcome = TaskOutcome(result, outputs, run_dir, agent=agent)
    outcome.summary = summarize(task, outcome)
    if store is not None:
        store.write_summary(result.run_id, outcome.summary)
        store.update_meta(result.run_id, outputs={o.name: o.path or f"error: {o.error}" for o in outputs})
    return outcome


def run_task(task: Task | str | Path, **kwargs: Any) -> TaskOutcome:
    """Sync edge of ``arun_task``."""
    return asyncio.run(arun_task(task, **kwargs))


def summarize(task: Task, outcome: TaskOutcome) -> dict[str, Any]:
    r = outcome.result
    traj = r.trajectory
    return {
        "run_id": r.run_id,
        "name": task.spec.name,
        "task_file": str(task.path) if task.path else None,
        "status": r.status,
        "ok": outcome.ok,
        "answer": _to_json(r.answer),
        "error": traj.error,
        "unverified": traj.meta.get("unverified"),  # why an answer nothing confirmed is not a success
        "checks": traj.meta.get("checks")
        or ({"failed": traj.meta["failed_checks"]} if "failed_checks" in traj.meta else None),
        "steps": len(traj.steps),
        "usage": traj.usage.to_dict(),
        "duration_s": round((traj.finished_at or time.time()) - traj.started_at, 3),
        "outputs": {o.name: o.path if o.path else {"error": o.error, "required": o.required} for o in outcome.outputs},
        "run_dir": str(outcome.run_dir) if outcome.run_dir else None,
    }


async def aresume(
    run_id: str, store: Any, *, on_event: Callable[[Event], None] | None = None, llm: LLM | None = None
) -> TaskOutcome:
    """Continue a stored run: rebuild the runtime from the task's inputs, replay the stored steps'
    successful code, then go on with the stored conversation."""
    run = store.get_run(run_id)
    if run["status"] in ("success", "unverified", "no_code"):
        raise ValueError(f"run {run['id']} already finished with status {run['status']!r}; nothing to resume")
    if not run["task_path"]:
        raise ValueError(
            f"run {run['id']} was not started from a task file; resume it from the SDK with Agent.arun(resume=...)"
        )
    task = load_task(run["task_path"])
    traj = store.load(run["id"])
    agent = build_agent(task, llm=llm)
    if run["status"] == "max_steps":  # drop the closing summary so the loop can go on
        traj.steps = [s for s in traj.steps if s.kind != "summary"]
        agent.max_steps = max(agent.max_steps, sum(1 for s in traj.steps if s.kind == "action") + task.spec.max_steps)
    _advance_scripted(agent.llm, traj)
    await agent.replay(traj)
    return await arun_task(task, store=store, on_event=on_event, agent=agent, resume=traj)


def resume(run_id: str, store: Any, **kwargs: Any) -> TaskOutcome:
    return asyncio.run(aresume(run_id, store, **kwargs))


def _advance_scripted(llm: LLM, traj: Trajectory) -> None:
    """A Scripted backend replaying a list continues where the stored run stopped, not from its first reply."""
    if isinstance(llm, Scripted) and not callable(llm.replies):
        calls = sum(int(s.meta.get("llm_calls", 1)) for s in traj.steps)
        llm._i = calls  # noqa: SLF001 - Scripted has no public seek; the replay index is all it keeps
