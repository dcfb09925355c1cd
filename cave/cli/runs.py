"""``cave schema``, ``cave runs list|show`` and ``cave skills list|show``."""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path
from typing import Any

from cave.cli.common import EXIT_BAD_INPUT, EXIT_OK, Command
from cave.cli.common import err as _err
from cave.cli.common import usage as _usage

__all__ = ["RUNS", "SCHEMA", "cmd_runs_list", "cmd_runs_show", "cmd_schema", "configure_runs", "configure_schema"]


def configure_schema(p: argparse.ArgumentParser) -> None:
    p.set_defaults(func=cmd_schema)


def configure_runs(runs: argparse.ArgumentParser) -> None:
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


SCHEMA = Command("schema", "print the JSON Schema of task files", configure_schema)
RUNS = Command("runs", "stored runs: list, show", configure_runs)


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
    color = {
        "success": "green",
        "no_code": "green",
        "unverified": "yellow",
        "running": "yellow",
        "interrupted": "yellow",
    }.get(status, "red")
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
    from rich.text import Text

    from cave.prompts import truncate_middle
    from cave.terminal import safe

    console = Console(highlight=False)
    head = Table.grid(padding=(0, 2))
    head.add_column(style="bold")
    head.add_column(overflow="fold")
    head.add_row("run id", run["id"])
    head.add_row("status", _status_markup(run["status"]))
    head.add_row("task", Text(safe(truncate_middle(run["task"], 600))))
    head.add_row("answer", Text(safe(truncate_middle(str(run["final_answer"]), 800))))
    if run["error"]:
        head.add_row("error", Text(safe(run["error"])))
    u = traj.usage
    head.add_row(
        "tokens",
        f"{u.prompt_tokens} prompt ({u.cached_tokens} cached) + {u.completion_tokens} completion = {u.total_tokens}",
    )
    if run["task_path"]:
        head.add_row("task file", run["task_path"])
    head.add_row("run dir", run["run_dir"] or "")
    console.print(Panel(head, title="run", title_align="left"))
    if args.steps:  # in full: long lines wrap, nothing is cut
        from rich.console import Group

        for s in traj.steps:
            code = Syntax(safe(s.code), "python", theme="ansi_dark", background_color="default", word_wrap=True)
            body: list = [code] if s.code else []
            body.append(Text(safe(s.observation if s.code else s.completion)))
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
            Text(safe(code[0][:60] + (" …" if len(code) > 1 else ""))) if code else "",
            Text(safe(obs[-1][:60])) if obs else "",
        )
    console.print(table)
    return EXIT_OK
