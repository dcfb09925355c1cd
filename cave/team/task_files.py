"""Task files with a ``team:`` section: loading, running and saving their outputs."""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from cave.agent import StepFinished
from cave.llm.base import LLM
from cave.team.decisions import summarize
from cave.team.episode import retrieve_from
from cave.team.errors import TeamError
from cave.team.files import read_yaml, validate_team
from cave.team.results import RoleEvent, TeamEvent, TeamFinished, TeamResult, TeamStarted
from cave.team.team import Team

__all__ = ["TeamOutcome", "TeamTask", "arun_team_task", "is_team_task", "load_team_task"]


@dataclass
class TeamTask:
    """A task file with a ``team:`` section: the task (cave.task.Task) and the team built from it."""

    task: Any  # cave.task.Task
    team: Team


def load_team_task(path: str | Path, *, backends: Mapping[str, LLM] | None = None) -> TeamTask:
    """Read a task file whose ``team:`` section (inline, or a path to a team file) defines the agents.

    Every problem (the task's and the team's) is reported as FILE:LINE: FIELD with the fix.
    """
    from cave.task import Task, TaskSpec, cross_checks, explain_error

    cfg = read_yaml(path, "team task file")
    path = Path(path)
    if not isinstance(cfg.data, dict) or "team" not in cfg.data:
        raise TeamError([f"{path}:1: a team task file needs `task:` and a `team:` section (roles and a pattern)"])
    data = dict(cfg.data)
    team_data = data.pop("team")
    context = {"base_dir": str(path.resolve().parent), "backend_keys": list(backends or {})}
    problems: list[str] = []
    spec = team_cfg = None
    try:
        if isinstance(team_data, str):  # `team: team.yaml`: errors name that file's lines
            team_path = path.resolve().parent / team_data
            team_cfg = read_yaml(team_path)
            if not isinstance(team_cfg.data, dict):
                raise TeamError([f"{team_path}:1: a team file must be a mapping with `roles:` and `pattern:`"])
            spec = validate_team(team_cfg, base_dir=team_path.parent, backend_keys=list(backends or {}))
            spec.source = str(team_path.resolve())
        else:
            spec = validate_team(cfg, data=team_data, prefix=("team",), **context)
    except TeamError as e:
        problems += e.problems
    try:
        task_spec = TaskSpec.model_validate(data, context=context)
        problems += cross_checks(task_spec, cfg)  # what would fail only once the run started
    except ValidationError as e:
        problems += [explain_error(err, cfg) for err in e.errors()]
    if problems:
        raise TeamError(problems)
    assert spec is not None
    task = Task(task_spec, path.resolve(), cfg.lines)
    if team_cfg is not None:
        team_file, team_lines, base = str(spec.source), team_cfg.lines, Path(str(spec.source)).parent
    else:
        team_lines = {k[1:]: v for k, v in cfg.lines.items() if k[:1] == ("team",)}
        team_file, base = str(path), path.resolve().parent
    return TeamTask(task, Team(spec, base_dir=base, backends=backends, lines=team_lines, file=team_file))


@dataclass
class TeamOutcome:
    result: TeamResult
    outputs: list[Any] = field(default_factory=list)  # cave.sdk.SavedOutput
    run_dir: Path | None = None

    @property
    def ok(self) -> bool:
        """As a single agent's run: ended with an answer (``success``, or ``unverified``: a vote without a
        majority) and every required output saved."""
        answered = self.result.ok or self.result.status == "unverified"
        return answered and not any(o.error and o.required for o in self.outputs)

    def summary(self) -> dict[str, Any]:
        """The JSON summary ``cave run --json`` prints (the single-agent summary's keys, plus roles)."""
        r, traj = self.result, self.result.trajectory
        return {
            "run_id": traj.run_id,
            "team_run_id": r.team_run_id,
            "status": r.status,
            "ok": self.ok,
            "answer": summarize(r.answer, 4000)
            if not isinstance(r.answer, (bool, int, float, str, type(None)))
            else r.answer,
            "error": traj.error,
            "steps": len(traj.steps),
            "roles": {role: len(traj.by_role(role)) for role in traj.meta.get("roles", [])},
            "usage": traj.usage.to_dict(),
            "duration_s": round((traj.finished_at or time.time()) - traj.started_at, 3),
            "outputs": {o.name: o.path if o.path else {"error": o.error, "required": o.required} for o in self.outputs},
            "run_dir": str(self.run_dir) if self.run_dir else None,
        }


def is_team_task(path: str | Path) -> bool:
    """True when a task file has a ``team:`` section (``cave run`` hands it to the team runner).

    A file that cannot be read or parsed is not a team task: the single-agent loader reports its problem.
    """
    try:
        data = read_yaml(path, "task file").data
    except TeamError:
        return False
    return isinstance(data, dict) and "team" in data


async def arun_team_task(
    tt: TeamTask | str | Path,
    *,
    store: Any = None,
    on_event: Callable[[TeamEvent], None] | None = None,
    seed: int | None = None,
) -> TeamOutcome:
    """What ``cave run team_task.yaml`` does: inputs into every role's runtime, run, save outputs.

    ``store`` (a cave.store.Store) records the ONE team trajectory step by step.
    """
    from cave.inputs import resolve_inputs
    from cave.sdk import SavedOutput, write_value

    if not isinstance(tt, TeamTask):
        tt = load_team_task(tt)
    task, team = tt.task, tt.team
    inputs = {name: value for name, (value, _) in resolve_inputs(task).items()}
    team.load_backends()
    seed = seed if seed is not None else task.spec.seed

    def handle(ev: TeamEvent) -> None:
        if store is not None:
            if isinstance(ev, TeamStarted):
                store.prepare(
                    ev.trajectory.run_id, task_path=str(task.path) if task.path else None, name=task.spec.name
                )
                store.start_run(ev.trajectory)
            elif isinstance(ev, RoleEvent) and isinstance(ev.event, StepFinished):
                store.add_step(ev.event.step)
            elif isinstance(ev, TeamFinished):
                store.finish_run(ev.result.trajectory)
        if on_event is not None:
            on_event(ev)

    try:
        result = await team.arun(task.prompt(), seed=seed, inputs=inputs, on_event=handle, keep_runtimes=True)
    finally:
        await team.aclose()
    try:
        run_dir = store.run_dir(result.trajectory.run_id) if store is not None else None
        if run_dir is not None:
            (run_dir / "outputs").mkdir(parents=True, exist_ok=True)
        outputs = [
            await _save_output(result, name, out, run_dir, write_value, SavedOutput)
            for name, out in task.spec.outputs.items()
        ]
    finally:
        result.close()
    return TeamOutcome(result, outputs, run_dir)


async def _save_output(
    result: TeamResult, name: str, out: Any, run_dir: Path | None, write_value: Any, saved: Any
) -> Any:
    var = out.variable or name
    try:
        if var == "final_answer":
            if result.status not in ("success", "unverified", "max_rounds", "max_hops"):
                raise KeyError(f"the team ended with status {result.status!r}")
            value = result.answer
        else:
            value = await _find_output(result, var)
        path = write_value(value, run_dir / "outputs" / name, out.format) if run_dir else None
        return saved(name, str(path) if path else None, required=out.required)
    except Exception as e:
        msg = str(e.args[0]) if isinstance(e, KeyError) and e.args else f"{type(e).__name__}: {e}"
        return saved(name, None, msg, out.required)


async def _find_output(result: TeamResult, var: str) -> Any:
    """An output variable: a published slot first, then any role's runtime (last to run first)."""
    if var in result.slots:
        return result.slots[var]
    seen = set()
    calls = result.trajectory.meta.get("calls", [])
    for role in [c["role"] for c in reversed(calls)] + list(result.runtimes or {}):
        rt = (result.runtimes or {}).get(role)
        if rt is None or id(rt) in seen:
            continue
        seen.add(id(rt))
        try:
            return await retrieve_from(rt, var)
        except KeyError:
            continue
    raise KeyError(f"no role left a variable named {var!r} and nothing was published under that name")
