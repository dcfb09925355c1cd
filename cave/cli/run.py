"""``cave run``: one agent or a team on a task file, or a stored run resumed.

Exit status: 0 the run ended with an answer (and every required output was saved); 1 it did not (max steps, an
error, a missing output); 2 bad input (task file, arguments), reported before any model is loaded; 130
interrupted.
"""

from __future__ import annotations

import argparse
import asyncio
from pathlib import Path
from typing import Any, Literal

from cave.cli.common import EXIT_BAD_INPUT, EXIT_FAILED, EXIT_INTERRUPTED, EXIT_OK, Command
from cave.cli.common import err as _err
from cave.cli.display import TeamDisplay
from cave.cli.display import display_for as _display

__all__ = ["COMMAND", "cmd_run", "configure", "positive_int", "team_main"]


RUNTIME_MODES = (
    "where the agent's code runs (the task file's `runtime:`): inprocess (this process, for your own code), "
    "kernel (its own process: killable), process (a kernel with resource limits: it contains mistakes, it is NOT "
    "a security boundary: the code can read your files, your environment and the network), sandbox (process "
    "plus a jail: for code you do not trust). See docs/threat-model.md."
)


def configure(p: argparse.ArgumentParser) -> None:
    p.epilog = RUNTIME_MODES
    p.add_argument("task", nargs="?", help="path to a task.yaml")
    p.add_argument("--resume", metavar="RUN_ID", help="continue a stored run (a unique prefix of its id is enough)")
    p.add_argument("--db", metavar="PATH", help="trajectory database (default: $CAVE_HOME/cave.db or ./runs/cave.db)")
    p.add_argument("--max-steps", type=positive_int, metavar="N", help="override the task's max_steps")
    p.add_argument(
        "--verify",
        type=attempts,
        metavar="N",
        help="override the task's verify: independent attempts that must agree before an answer without checks "
        "ends `success` (0: off, every such answer ends `unverified`)",
    )
    mode = p.add_mutually_exclusive_group()
    mode.add_argument("-q", "--quiet", action="store_true", help="print only the answer")
    mode.add_argument("--json", action="store_true", help="print one JSON summary on stdout, nothing else")
    p.set_defaults(func=cmd_run)


def positive_int(text: str) -> int:
    """argparse type: an integer >= 1 (``--max-steps 0`` or ``-5`` is bad input, not ignored)."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not an integer; give a whole number >= 1") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"{value} is less than 1; give a whole number >= 1")
    return value


def attempts(text: str) -> int:
    """argparse type: a number of verification attempts, 0 to 9."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not an integer; give a whole number from 0 (off) to 9") from None
    if not 0 <= value <= 9:
        raise argparse.ArgumentTypeError(f"{value} is out of range; give a whole number from 0 (off) to 9")
    return value


COMMAND = Command("run", "run an agent or a team on a task file (or resume a stored run)", configure)


def cmd_run(args: argparse.Namespace) -> int:
    from cave.store import Store
    from cave.task import TaskError, load_task

    if bool(args.task) == bool(args.resume):
        _err("cave run: give a task file (cave run examples/sales/task.yaml) or --resume RUN_ID, not both")
        return EXIT_BAD_INPUT
    try:
        store = Store(args.db)
    except Exception as e:  # a directory, an unwritable place, a file that is not a database
        _err(f"error: --db {args.db}: cannot open the run database ({type(e).__name__}: {str(e).splitlines()[0]})")
        _err("  fix: give the path of a SQLite file cave may create or write (or leave --db out)")
        return EXIT_BAD_INPUT
    try:
        if args.resume:
            return _resume(args, store)
        team_main = _team_runner(args.task)
        if team_main is not None:  # a task file with a `team:` section runs a team of agents
            mode = "json" if args.json else "quiet" if args.quiet else "rich"
            return int(team_main(args.task, store=store, mode=mode))
        try:
            task = load_task(args.task)
            if args.max_steps:
                task.spec.max_steps = args.max_steps
            if args.verify is not None:
                task.spec.verify = args.verify
            from cave.sdk import build_agent

            # Inputs, runtime and skills first: bad input exits 2 before the model loads.
            agent = build_agent(task)
        except TaskError as e:
            _err(f"error: {e}")
            return EXIT_BAD_INPUT
        except Exception as e:  # the backend could not be created (missing package, bad model file)
            _err(f"error: cannot start the run: {type(e).__name__}: {e}")
            return EXIT_FAILED
        return _execute(args, store, task, agent)
    finally:
        store.close()


def _team_runner(path: str) -> Any:
    """The team runner when ``path`` is a team task file, else None (cave.team is imported only then)."""
    if not Path(path).is_file():  # a FIFO or a device would block the read; the task loader reports it
        return None
    try:
        with open(path, "rb") as f:  # a cheap look first: most task files are single-agent
            if b"team:" not in f.read(4 * 1024 * 1024):
                return None
    except OSError:
        return None
    from cave.team import is_team_task

    return team_main if is_team_task(path) else None


def _resume(args: argparse.Namespace, store: Any) -> int:
    from cave.sdk import aresume
    from cave.task import TaskError

    try:
        run = store.get_run(args.resume)
    except KeyError as e:
        _err(f"error: {e.args[0]}")
        return EXIT_BAD_INPUT
    display = _display(args, title=f"resuming {run['id']}")
    try:
        outcome = asyncio.run(aresume(run["id"], store, on_event=display.on_event))
    except (TaskError, ValueError) as e:
        display.close()
        _err(f"error: {e}")
        return EXIT_BAD_INPUT
    except KeyboardInterrupt:
        display.close()
        _err(f"interrupted; continue with: cave run --resume {run['id']}")
        return EXIT_INTERRUPTED
    if outcome.agent is not None:
        outcome.agent.runtime.close()
    display.finish(outcome)
    return EXIT_OK if outcome.ok else EXIT_FAILED


def _execute(args: argparse.Namespace, store: Any, task: Any, agent: Any) -> int:
    from cave.sdk import arun_task

    display = _display(args, title=task.spec.name or str(args.task), agent=agent)
    run_id = None

    def on_event(ev: Any) -> None:
        nonlocal run_id
        from cave.agent import RunStarted

        if isinstance(ev, RunStarted):
            run_id = ev.trajectory.run_id
        display.on_event(ev)

    try:
        outcome = asyncio.run(arun_task(task, store=store, on_event=on_event, agent=agent))
    except KeyboardInterrupt:
        display.close()
        _err("interrupted" + (f"; continue with: cave run --resume {run_id}" if run_id else ""))
        return EXIT_INTERRUPTED
    finally:
        agent.runtime.close()
    display.finish(outcome)
    return EXIT_OK if outcome.ok else EXIT_FAILED


def team_main(
    path: str | Path,
    *,
    store: Any = None,
    seed: int | None = None,
    console: Any = None,
    mode: Literal["rich", "quiet", "json"] = "rich",
) -> int:
    """``cave run team_task.yaml``: run the team, showing each role's steps as they happen.

    ``mode``: "rich" (the live display), "quiet" (the answer only) or "json" (one JSON summary).
    Exit status as ``cave run``: 0 success with every required output saved, 1 not, 2 bad input, 130 interrupted.
    """
    import json

    from rich.console import Console

    from cave.task import TaskError
    from cave.team import BackendStartError, TeamError, arun_team_task, load_team_task, summarize
    from cave.terminal import safe

    console = console or Console(highlight=False)
    errors = Console(stderr=True, highlight=False) if mode != "rich" else console
    try:
        tt = load_team_task(path)
    except (TeamError, TaskError) as e:
        errors.print(f"error: {e}", style="red", markup=False)
        return 2
    display = TeamDisplay(console) if mode == "rich" else None
    try:
        outcome = asyncio.run(arun_team_task(tt, store=store, on_event=display, seed=seed))
    except (TeamError, TaskError) as e:  # inputs that do not load: before any model is loaded
        errors.print(f"error: {e}", style="red", markup=False)
        return 2
    except BackendStartError as e:
        errors.print(f"error: cannot start the run: {e}", style="red", markup=False)
        return 1
    except KeyboardInterrupt:
        errors.print("interrupted", style="yellow")
        return 130
    if mode == "json":
        print(json.dumps(outcome.summary(), default=repr))
    elif mode == "quiet":
        if not outcome.result.ok:
            errors.print(
                f"team run ended with status {outcome.result.status}: {outcome.result.trajectory.error}", markup=False
            )
        print(safe(summarize(outcome.result.answer, 4000)))
    for o in outcome.outputs:
        if mode == "rich" or o.error:
            where = o.path or (f"error: {o.error}" if o.error else "not saved (no store given)")
            errors.print(f"output {o.name}: {where}", markup=False)
    if mode == "rich" and outcome.run_dir:
        console.print(f"run dir: {outcome.run_dir}", markup=False)
    return 0 if outcome.ok else 1
