"""What a ``cave bench`` suite is made of: the ``Suite`` record and its registry, the options the suites share, the
model spec (``--model BACKEND[:MODEL]``) and the per-group summary.

``cave.benchmarks.cli`` (the command) and the suites that live in their own packages (``analyst``, ``dabench``) both
import this module; the suites never import the command, so the command can import them to register them.
"""

from __future__ import annotations

import argparse
import json
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from cave.llm.base import LLM, create_backend
from cave.registry import Registry

__all__ = [
    "SUITES",
    "Suite",
    "agent_option",
    "agent_options",
    "common_options",
    "make_llm",
    "models",
    "parse_model",
    "question_options",
    "register_suite",
    "resume_option",
    "run_questions",
    "runtime_option",
    "summarize",
    "tool_call_format",
]


@dataclass(frozen=True)
class Suite:
    """One ``cave bench`` subcommand: its own options and a runner ``(args, agents, emit) -> summary``."""

    name: str
    help: str
    options: Callable[[argparse.ArgumentParser], None]
    run: Callable[[argparse.Namespace, list[str], Callable[..., None]], dict[str, Any]]


SUITES: Registry[Suite] = Registry("benchmark suite")


def register_suite(suite: Suite) -> Suite:
    SUITES.add(suite.name, suite)
    return suite


# -- options -----------------------------------------------------------------------------------------------------
def common_options(p: argparse.ArgumentParser) -> None:
    """The options every suite takes."""
    p.add_argument(
        "--model", default="local", help="BACKEND[:MODEL], e.g. local, local:smollm2, openai:NAME (default: local)"
    )
    p.add_argument(
        "--model-option", action="append", default=[], metavar="KEY=VALUE", help="backend option (repeatable)"
    )
    p.add_argument("--base-url", help="for openai-compatible backends")
    p.add_argument("--agent", default="code", help="code, json or code,json (default: code)")
    p.add_argument("--limit", type=int, help="entries per category / tasks per domain / tasks (default: all)")
    p.add_argument("--max-steps", type=int, default=None, help="LLM calls per task (per user turn in tau2)")
    p.add_argument("--out", help="output folder (default: runs/bench/SUITE-TIMESTAMP)")
    p.add_argument("-q", "--quiet", action="store_true", help="no per-entry lines, only the table")


def runtime_option(p: argparse.ArgumentParser) -> None:
    from cave.benchmarks.runtime import RUNTIME_CHOICES, RUNTIME_HELP

    p.add_argument("--runtime", choices=RUNTIME_CHOICES, help=RUNTIME_HELP)


def tool_call_format(p: argparse.ArgumentParser) -> None:
    fmt = p.add_mutually_exclusive_group()
    fmt.add_argument(
        "--native", dest="native", action="store_const", const=True, help="json agent: force native tool calls"
    )
    fmt.add_argument(
        "--prompted",
        dest="native",
        action="store_const",
        const=False,
        help="json agent: force the prompted JSON format",
    )


def resume_option(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--resume",
        action="store_true",
        help="continue the run in --out: entries already in its entries.jsonl are not run again, and the table "
        "covers them too (a long run can be stopped and picked up later, or split across machines' sessions)",
    )


def agent_option(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--agent-option",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="code agent option (repeatable; YAML values), e.g. review=true or 'response_prefix=```python\n'",
    )


def verify_option(p: argparse.ArgumentParser) -> None:
    """``--verify N``: the code agent's independent attempts (``Agent(verify=N)``) for answers without checks."""
    p.add_argument(
        "--verify",
        type=int,
        default=None,
        metavar="N",
        help="independent attempts that must agree before an answer without checks ends `success` "
        "(default: the agent's, 1; 0: off, every such answer ends `unverified`)",
    )


def question_options(p: argparse.ArgumentParser) -> None:
    """The options a suite of closed-form questions over given data takes after its own (``dabench``,
    ``databench``): agent options, ``--verify``, six steps, ``--limit`` as a seeded sample, the runtime, the JSON
    agent's format, ``--resume``."""
    agent_option(p)
    verify_option(p)
    p.set_defaults(max_steps=6)
    p._option_string_actions["--limit"].help = "questions, a seeded sample (default: all)"
    runtime_option(p)
    tool_call_format(p)
    resume_option(p)


def run_questions(
    args: Any,
    agents: list[str],
    emit: Callable[..., None],
    suite: str,
    questions: list[Any],
    question_id: Callable[[Any], Any],
    run_one: Callable[[Any, str, LLM, str], Any],
) -> list[dict[str, Any]]:
    """Every (model, agent, question) not finished before (``--resume``: the earlier rows of this selection count),
    each through ``run_one(question, agent, llm, model_name)`` whose result has ``record()`` and ``trajectory``; a
    model with nothing left to run is not even loaded. The rows of the selection, old and new."""
    ids = {question_id(q) for q in questions}
    rows = [r for r in getattr(args, "previous_rows", []) if r.get("suite") == suite and r.get("id") in ids]
    done = {(r["model"], r["agent"], r["id"]) for r in rows}
    for name, build in models(args):
        todo = [(agent, q) for agent in agents for q in questions if (name, agent, question_id(q)) not in done]
        if not todo:
            continue
        llm = build()
        for agent, q in todo:
            result = run_one(q, agent, llm, name)
            row = result.record()
            emit(row, result.trajectory)
            rows.append(row)
    return rows


def agent_options(args: Any) -> dict[str, Any]:
    """``--agent-option KEY=VALUE`` -> keyword arguments of ``Agent`` (values read as YAML scalars)."""
    import yaml

    out: dict[str, Any] = {}
    for item in args.agent_option or []:
        key, sep, value = item.partition("=")
        if not sep or not key.isidentifier():
            raise SystemExit(f"--agent-option {item!r}: write KEY=VALUE, e.g. review=true")
        if key in ("response_prefix", "instructions"):  # text as given, with \n escapes
            out[key] = value.encode().decode("unicode_escape")
            continue
        try:
            out[key] = yaml.safe_load(value) if value.strip() else value
        except yaml.YAMLError:
            out[key] = value
    if getattr(args, "verify", None) is not None:
        if args.verify < 0:
            raise SystemExit(f"--verify {args.verify}: give a whole number of attempts >= 0 (0: off)")
        out["verify"] = args.verify
    return out


# -- models ------------------------------------------------------------------------------------------------------
def parse_model(spec: str, options: list[str], base_url: str | None = None) -> tuple[str, dict[str, Any]]:
    """``"openai:gpt-4o"`` + ``["context_window=16384"]`` -> ("openai", {"model": "gpt-4o", "context_window": 16384}).

    >>> parse_model("local:smollm2", ["n_ctx=2048"])
    ('local', {'model': 'smollm2', 'n_ctx': 2048})
    """
    backend, _, model = spec.partition(":")
    opts: dict[str, Any] = {"model": model} if model else {}
    if base_url:
        opts["base_url"] = base_url
    for item in options:
        key, sep, value = item.partition("=")
        if not sep:
            raise SystemExit(f"--model-option {item!r}: write KEY=VALUE")
        try:
            opts[key] = json.loads(value)
        except json.JSONDecodeError:
            opts[key] = value
    return backend, opts


def make_llm(spec: str, options: list[str], base_url: str | None = None) -> LLM:
    backend, opts = parse_model(spec, options, base_url)
    return create_backend(backend, **opts)


def models(args: Any) -> list[tuple[str, Any]]:
    """``--model a,b`` -> [(name, llm)], built lazily (one embedded model loaded at a time)."""
    return [(m, lambda m=m: make_llm(m, args.model_option, args.base_url)) for m in args.model.split(",") if m]


# -- summary -----------------------------------------------------------------------------------------------------
def summarize(rows: list[dict[str, Any]], key: str, ok: str, *, title: str) -> dict[str, Any]:
    """Per (agent, group): n, success rate, mean tokens and steps (and overflows for the data suite).

    An entry whose run ended in ``error`` (the backend or the runtime failed: an HTTP 400, a dead server) is
    counted under ``errors`` and left out of the rate: it says nothing about the agent, and scoring it would call
    a refused request a wrong answer (or, in BFCL's irrelevance category, a right one).

    >>> s = summarize([{"agent": "code", "size": 100, "success": True, "prompt_tokens": 10, "total_tokens": 12, "steps": 1},
    ...                {"agent": "code", "size": 100, "success": True, "status": "error"}], "size", "success", title="t")
    >>> s["groups"][0]["rate"], s["groups"][0]["errors"], s["groups"][0]["prompt_tokens"]
    (1.0, 1, 10.0)
    """
    groups: dict[tuple[str, Any], list[dict[str, Any]]] = defaultdict(list)
    for r in rows:
        groups[(r["agent"], r[key])].append(r)
    out = []
    for (agent, value), every in groups.items():
        rs = [r for r in every if r.get("status") != "error"]
        n = max(1, len(rs))
        g = {
            "agent": agent,
            key: value,
            "n": len(every),
            "errors": len(every) - len(rs),
            "rate": sum(bool(r.get(ok)) for r in rs) / len(rs) if rs else None,
            "prompt_tokens": sum(r.get("prompt_tokens", 0) for r in rs) / n,
            "completion_tokens": sum(r.get("completion_tokens", 0) for r in rs) / n,
            "total_tokens": sum(r.get("total_tokens", 0) for r in rs) / n,
            "steps": sum(r.get("steps", 0) for r in rs) / n,
        }
        if rs and "reward" in rs[0]:
            g["avg_reward"] = sum(r["reward"] for r in rs) / n
        if "overflow" in every[0]:
            g["overflow"] = sum(bool(r["overflow"]) for r in rs)
        out.append(g)
    scored = [r for r in rows if r.get("status") != "error"]
    overall = {
        agent: sum(bool(r.get(ok)) for r in scored if r["agent"] == agent)
        / max(1, sum(r["agent"] == agent for r in scored))
        for agent in dict.fromkeys(r["agent"] for r in rows)
    }
    errors = sum(r.get("status") == "error" for r in rows)
    return {"title": title, "key": key, "groups": out, "overall": overall, "errors": errors, "entries": len(rows)}
