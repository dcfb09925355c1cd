"""The ``cave`` command.

    cave run TASK.yaml [--quiet | --json] [--db PATH] [--max-steps N]
    cave run --resume RUN_ID
    cave run TEAM_TASK.yaml          # a task file with a `team:` section runs a team (cave.team)
    cave bench bfcl|tau2|data ...    # benchmarks (cave.benchmarks.cli)
    cave train CONFIG [--resume RUN_DIR] | cave train plot RUN_DIR   # Dr. MAS RL (cave.training.cli)
    cave schema                      # the JSON Schema of task files
    cave runs list [--limit N] [--json]
    cave runs show RUN_ID [--steps] [--json]
    cave skills list [PATH ...]
    cave skills show NAME [PATH ...]

Exit status: 0 the run ended with an answer (and every required output was
saved); 1 it did not (max steps, an error, a missing output); 2 bad input
(task file, arguments), reported before any model is loaded; 130 interrupted.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import time
from pathlib import Path
from typing import Any

EXIT_OK, EXIT_FAILED, EXIT_BAD_INPUT, EXIT_INTERRUPTED = 0, 1, 2, 130


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv[:1] == ["bench"]:  # everything after `bench` belongs to the benchmark CLI, --help included
        return cmd_bench(argparse.Namespace(args=argv[1:]))
    if argv[:1] == [
        "train"
    ]:  # likewise for the trainer: cave train CONFIG [--resume RUN_DIR] | cave train plot RUN_DIR
        return cmd_train(argv[1:])
    parser = build_parser()
    args = parser.parse_args(argv)
    if not getattr(args, "func", None):
        parser.print_help()
        return EXIT_BAD_INPUT
    return int(args.func(args) or 0)


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="cave", description="LLM agents that act by writing Python in a persistent runtime."
    )
    sub = p.add_subparsers(dest="command", metavar="COMMAND")

    run = sub.add_parser("run", help="run an agent on a task file (or resume a stored run)")
    run.add_argument("task", nargs="?", help="path to a task.yaml")
    run.add_argument("--resume", metavar="RUN_ID", help="continue a stored run (a unique prefix of its id is enough)")
    run.add_argument("--db", metavar="PATH", help="trajectory database (default: $CAVE_HOME/cave.db or ./runs/cave.db)")
    run.add_argument("--max-steps", type=int, metavar="N", help="override the task's max_steps")
    mode = run.add_mutually_exclusive_group()
    mode.add_argument("-q", "--quiet", action="store_true", help="print only the answer")
    mode.add_argument("--json", action="store_true", help="print one JSON summary on stdout, nothing else")
    run.set_defaults(func=cmd_run)

    sub.add_parser(
        "train", help="multi-agent RL (Dr. MAS): cave train CONFIG | cave train plot RUN_DIR", add_help=False
    )
    bench = sub.add_parser(
        "bench", help="benchmarks: cave bench bfcl|tau2|data ... (see cave bench --help)", add_help=False
    )
    bench.add_argument("args", nargs=argparse.REMAINDER)
    bench.set_defaults(func=cmd_bench)

    schema = sub.add_parser("schema", help="print the JSON Schema of task files")
    schema.set_defaults(func=cmd_schema)

    runs = sub.add_parser("runs", help="stored runs")
    runs_sub = runs.add_subparsers(dest="runs_command", metavar="ACTION")
    ls = runs_sub.add_parser("list", help="recent runs, newest first")
    ls.add_argument("--limit", type=int, default=20)
    ls.add_argument("--status", help="only runs with this status")
    ls.add_argument("--db", metavar="PATH")
    ls.add_argument("--json", action="store_true")
    ls.set_defaults(func=cmd_runs_list)
    show = runs_sub.add_parser("show", help="one run: its steps, tokens and answer")
    show.add_argument("run_id")
    show.add_argument("--steps", action="store_true", help="print every step's code and observation in full")
    show.add_argument("--messages", action="store_true", help="with --json: include each step's prompt messages")
    show.add_argument("--db", metavar="PATH")
    show.add_argument("--json", action="store_true")
    show.set_defaults(func=cmd_runs_show)
    runs.set_defaults(func=lambda a: _usage(runs))

    skills = sub.add_parser("skills", help="Agent Skills: list or show")
    skills_sub = skills.add_subparsers(dest="skills_command", metavar="ACTION")
    sl = skills_sub.add_parser("list", help="skills found in PATHs, entry points and the bundled folder")
    sl.add_argument("paths", nargs="*", metavar="PATH")
    sl.set_defaults(func=cmd_skills_list)
    ss = skills_sub.add_parser("show", help="one skill's fields, files and instructions")
    ss.add_argument("name")
    ss.add_argument("paths", nargs="*", metavar="PATH")
    ss.set_defaults(func=cmd_skills_show)
    skills.set_defaults(func=lambda a: _usage(skills))
    return p


def _usage(parser: argparse.ArgumentParser) -> int:
    parser.print_help(sys.stderr)
    return EXIT_BAD_INPUT


def _err(message: str) -> None:
    from rich.console import Console

    Console(stderr=True, highlight=False, soft_wrap=True).print(message, markup=False)


# -- cave run ------------------------------------------------------------------------------------
def cmd_run(args: argparse.Namespace) -> int:
    from cave.store import Store
    from cave.task import TaskError, load_task

    if bool(args.task) == bool(args.resume):
        _err("cave run: give a task file (cave run examples/sales/task.yaml) or --resume RUN_ID, not both")
        return EXIT_BAD_INPUT
    store = Store(args.db)
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
    """cave.team's runner when ``path`` is a team task file, else None (cave.team is imported only then)."""
    try:
        text = Path(path).read_text(encoding="utf-8")
    except OSError:
        return None
    if "team:" not in text:
        return None
    try:
        from cave import team
    except ImportError:
        return None
    return team.team_main if team.is_team_task(path) else None


def cmd_train(argv: list[str]) -> int:
    try:
        from cave.training.cli import train_main
    except ImportError as e:
        _err(f"error: the trainer needs the [train] extra: scripts/install.sh train ({e})")
        return 2
    return int(train_main(argv) or 0)


def cmd_bench(args: argparse.Namespace) -> int:
    try:
        from cave.benchmarks.cli import bench_main
    except ImportError as e:
        _err(f"error: the benchmarks are not available in this installation ({e})")
        return EXIT_FAILED
    return int(bench_main(args.args) or 0)


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


def _display(args: argparse.Namespace, title: str, agent: Any = None) -> Any:
    if args.json:
        return JsonDisplay()
    if args.quiet:
        return QuietDisplay()
    return RichDisplay(title, agent)


class QuietDisplay:
    """--quiet: the answer on stdout, problems on stderr."""

    def on_event(self, ev: Any) -> None:
        pass

    def close(self) -> None:
        pass

    def finish(self, outcome: Any) -> None:
        r = outcome.result
        if r.status not in ("success", "no_code"):
            _err(
                f"run {r.run_id} ended with status {r.status}"
                + (f": {r.trajectory.error}" if r.trajectory.error else "")
            )
        for o in outcome.outputs:
            if o.error:
                _err(f"output {o.name}: {o.error}")
        print(_answer_text(r.answer))


class JsonDisplay(QuietDisplay):
    """--json: one JSON object (the run summary) on stdout."""

    def finish(self, outcome: Any) -> None:
        print(json.dumps(outcome.summary, default=repr))


def _answer_text(answer: Any, limit: int = 4000) -> str:
    from cave.prompts import truncate_middle

    text = answer if isinstance(answer, str) else repr(answer)
    return truncate_middle(text, limit)


class RichDisplay:
    """Steps as they happen: the code, truncated output, tokens; a live progress line while the model writes."""

    def __init__(self, title: str, agent: Any = None) -> None:
        from rich.console import Console

        self.console = Console(highlight=False)
        self.title = title
        self.live: Any = None
        self.buffer = ""
        self.step_index = 0
        self.max_steps = getattr(agent, "max_steps", 0)
        self.tokens = 0
        self.t0 = time.time()
        self.phase = "starting"
        if agent is not None:
            model = getattr(agent.llm, "model_name", None) or getattr(agent.llm, "name", type(agent.llm).__name__)
            self.console.print(f"[bold]cave[/bold] {title}  [dim]model={model} runtime={agent.runtime.name}[/dim]")

    # live progress line (only on a terminal: logs and pipes get the step panels only)
    def _status(self) -> Any:
        from rich.spinner import Spinner
        from rich.text import Text

        tail = self.buffer[-400:].splitlines()[-4:]
        line = f" step {self.step_index + 1}/{self.max_steps} · {self.phase} · {self.tokens} tokens · {time.time() - self.t0:.0f}s"
        group = [Spinner("dots", text=Text(line, style="cyan"))]
        if tail and self.phase == "generating":
            group.append(Text("\n".join("  " + t for t in tail), style="dim"))
        from rich.console import Group

        return Group(*group)

    def _refresh(self) -> None:
        if not self.console.is_terminal:
            return
        if self.live is None:
            from rich.live import Live

            self.live = Live(self._status(), console=self.console, refresh_per_second=8, transient=True)
            self.live.start()
        else:
            self.live.update(self._status())

    def close(self) -> None:
        if self.live is not None:
            self.live.stop()
            self.live = None

    def on_event(self, ev: Any) -> None:
        from cave import agent as a

        if isinstance(ev, a.RunStarted):
            verb = "resumed" if ev.resumed else "started"
            self.console.print(f"[dim]run {ev.trajectory.run_id} {verb}[/dim]")
            self.step_index = len([s for s in ev.trajectory.steps if s.kind == "action"])
        elif isinstance(ev, a.StepStarted):
            self.step_index, self.max_steps, self.buffer, self.phase = ev.index, ev.max_steps, "", "generating"
            self._refresh()
        elif isinstance(ev, a.TextChunk):
            self.buffer += ev.text
            self._refresh()
        elif isinstance(ev, a.CodeStarted):
            self.phase = f"running block {ev.block + 1}"
            self._refresh()
        elif isinstance(ev, a.StepFinished):
            self.tokens += ev.step.usage.total_tokens
            self._print_step(ev.step)
        elif isinstance(ev, a.Compacted):
            self._print(
                f"[yellow]context compacted ({ev.how}): {ev.tokens_before} -> {ev.tokens_after} tokens[/yellow]"
            )
        elif isinstance(ev, a.RunError):
            self._print(f"[red]error: {ev.message}[/red]")

    def _print(self, renderable: Any) -> None:
        self.console.print(renderable)

    def _print_step(self, step: Any) -> None:
        from rich.console import Group
        from rich.panel import Panel
        from rich.syntax import Syntax
        from rich.text import Text

        from cave.prompts import truncate_middle

        parts: list[Any] = []
        prose = _prose(step.completion)
        if prose:
            parts.append(Text(truncate_middle(prose, 600), style="italic"))
        if step.code:
            parts.append(
                Syntax(truncate_middle(step.code, 3000), "python", theme="ansi_dark", background_color="default")
            )
        if step.observation:
            obs = step.observation.removeprefix("Observation:\n")
            style = "red" if step.execution is not None and not step.execution.ok else "green"
            parts.append(Text(truncate_middle(obs, 1200), style=style))
        u = step.usage
        cached = f" (cached {u.cached_tokens})" if u.cached_tokens else ""
        subtitle = f"{u.prompt_tokens}{cached} + {u.completion_tokens} tokens · llm {step.llm_duration:.1f}s · total {step.duration:.1f}s"
        title = f"step {step.index + 1}" + ("" if step.kind == "action" else f" · {step.kind}")
        self._print(
            Panel(
                Group(*parts) if parts else Text(""),
                title=title,
                subtitle=subtitle,
                title_align="left",
                subtitle_align="right",
            )
        )

    def finish(self, outcome: Any) -> None:
        from rich.panel import Panel
        from rich.table import Table

        self.close()
        r = outcome.result
        color = "green" if outcome.ok else "red"
        table = Table.grid(padding=(0, 2))
        table.add_column(style="bold")
        table.add_column(overflow="fold")
        table.add_row("status", f"[{color}]{r.status}[/{color}]")
        table.add_row("answer", _answer_text(r.answer, 1500))
        if r.trajectory.error:
            table.add_row("error", r.trajectory.error)
        for o in outcome.outputs:
            table.add_row(f"output {o.name}", o.path or f"[red]{o.error}[/red]")
        u = r.usage
        table.add_row(
            "tokens", f"{u.prompt_tokens} prompt ({u.cached_tokens} cached) + {u.completion_tokens} completion"
        )
        table.add_row("steps", str(len(r.trajectory.steps)))
        if outcome.run_dir:
            table.add_row("run dir", str(outcome.run_dir))
        table.add_row("run id", r.run_id)
        self.console.print(Panel(table, title="result", title_align="left", border_style=color))


def _prose(text: str) -> str:
    """A reply without its code blocks (the reasoning part)."""
    import re

    return re.sub(r"```.*?(```|\Z)", "", text, flags=re.S).strip()


# -- cave schema ---------------------------------------------------------------------------------
def cmd_schema(args: argparse.Namespace) -> int:
    from cave.task import json_schema

    print(json.dumps(json_schema(), indent=2))
    return EXIT_OK


# -- cave runs -----------------------------------------------------------------------------------
def _open_store(args: argparse.Namespace) -> Any:
    from cave.store import Store, default_db_path

    path = Path(args.db) if args.db else default_db_path()
    if not path.is_file():
        _err(f"no run database at {path}; run a task first (cave run examples/sales/task.yaml) or pass --db PATH")
        return None
    return Store(path)


def cmd_runs_list(args: argparse.Namespace) -> int:
    store = _open_store(args)
    if store is None:
        return EXIT_BAD_INPUT
    with store:
        rows = store.list_runs(args.limit, args.status)
    if args.json:
        print(json.dumps(rows, default=repr))
        return EXIT_OK
    from rich.console import Console
    from rich.table import Table

    table = Table(title=f"{len(rows)} run(s) in {store.path}")
    for col in ("run id", "started", "status", "steps", "tokens", "name / task"):
        table.add_column(col, overflow="fold")
    for r in rows:
        started = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(r["created_at"]))
        label = r["name"] or " ".join(r["task"].split())[:70]
        table.add_row(r["id"], started, _status_markup(r["status"]), str(r["n_steps"]), str(r["total_tokens"]), label)
    Console().print(table)
    return EXIT_OK


def _status_markup(status: str) -> str:
    color = {"success": "green", "no_code": "green", "running": "yellow", "interrupted": "yellow"}.get(status, "red")
    return f"[{color}]{status}[/{color}]"


def cmd_runs_show(args: argparse.Namespace) -> int:
    store = _open_store(args)
    if store is None:
        return EXIT_BAD_INPUT
    with store:
        try:
            run = store.get_run(args.run_id)
        except KeyError as e:
            _err(f"error: {e.args[0]}")
            return EXIT_BAD_INPUT
        traj = store.load(run["id"])
    if args.json:
        d = traj.to_dict()
        if not args.messages:
            for s in d["steps"]:
                s.pop("messages", None)
        d["run"] = {k: run[k] for k in ("name", "task_path", "run_dir", "n_steps", "updated_at")}
        print(json.dumps(d, default=repr))
        return EXIT_OK
    from rich.console import Console
    from rich.panel import Panel
    from rich.syntax import Syntax
    from rich.table import Table

    from cave.prompts import truncate_middle

    console = Console(highlight=False)
    head = Table.grid(padding=(0, 2))
    head.add_column(style="bold")
    head.add_column(overflow="fold")
    head.add_row("run id", run["id"])
    head.add_row("status", _status_markup(run["status"]))
    head.add_row("task", truncate_middle(run["task"], 600))
    head.add_row("answer", truncate_middle(str(run["final_answer"]), 800))
    if run["error"]:
        head.add_row("error", run["error"])
    u = traj.usage
    head.add_row(
        "tokens",
        f"{u.prompt_tokens} prompt ({u.cached_tokens} cached) + {u.completion_tokens} completion = {u.total_tokens}",
    )
    if run["task_path"]:
        head.add_row("task file", run["task_path"])
    head.add_row("run dir", run["run_dir"] or "")
    console.print(Panel(head, title="run", title_align="left"))
    if args.steps:
        for s in traj.steps:
            body = [Syntax(s.code, "python", theme="ansi_dark", background_color="default")] if s.code else []
            from rich.console import Group
            from rich.text import Text

            text = s.observation if s.code else s.completion
            body.append(Text(text))
            console.print(
                Panel(
                    Group(*body),
                    title=f"step {s.index + 1} · {s.kind}",
                    title_align="left",
                    subtitle=f"{s.usage.total_tokens} tokens",
                )
            )
        return EXIT_OK
    table = Table(title=f"{len(traj.steps)} step(s)")
    for col in ("#", "kind", "tokens (prompt+completion)", "seconds", "code", "observation"):
        table.add_column(col, overflow="fold")
    for s in traj.steps:
        code = (s.code or "").strip().splitlines()
        obs = s.observation.removeprefix("Observation:\n").strip().splitlines()
        table.add_row(
            str(s.index + 1),
            s.kind,
            f"{s.usage.prompt_tokens}+{s.usage.completion_tokens}",
            f"{s.duration:.2f}",
            (code[0][:60] + (" …" if len(code) > 1 else "")) if code else "",
            (obs[-1][:60] if obs else ""),
        )
    console.print(table)
    return EXIT_OK


# -- cave skills ---------------------------------------------------------------------------------
def _skills_module() -> Any:
    try:
        from cave import skills
    except ImportError as e:
        _err(f"error: Agent Skills are not available in this installation (cave.skills: {e})")
        return None
    return skills


def cmd_skills_list(args: argparse.Namespace) -> int:
    skills = _skills_module()
    if skills is None:
        return EXIT_FAILED
    return int(skills.cmd_list(args.paths or None) or 0)


def cmd_skills_show(args: argparse.Namespace) -> int:
    skills = _skills_module()
    if skills is None:
        return EXIT_FAILED
    return int(skills.cmd_show(args.name, args.paths or None) or 0)


if __name__ == "__main__":
    raise SystemExit(main())
