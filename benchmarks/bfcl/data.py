"""BFCL categories, loaded from the data that ships inside the ``bfcl-eval`` package.

An ``Entry`` is one test case: the conversation (one turn for single-turn categories, several
for multi-turn), the function docs, and the possible answers (single-turn: allowed values per
parameter; multi-turn: the gold call strings per turn). Loading uses bfcl-eval's own loader,
so the function docs of multi-turn entries are populated exactly as its harness does.

``gold_calls`` turns a possible answer back into concrete calls; the tests replay them through
both agents to prove that call capture and conversion lose nothing.
"""

from __future__ import annotations

import ast
import copy
import os
from dataclasses import dataclass, field
from functools import cache
from typing import Any

# bfcl-eval names v4 "simple" as simple_python; the others are the file names' own.
SINGLE_TURN = ("simple", "multiple", "parallel", "parallel_multiple", "irrelevance")
MULTI_TURN = ("multi_turn_base", "multi_turn_miss_func", "multi_turn_miss_param", "multi_turn_long_context")
CATEGORIES = SINGLE_TURN + MULTI_TURN
DEFAULT_CATEGORIES = SINGLE_TURN + ("multi_turn_base",)
ALIASES = {"simple": "simple_python", "simple_python": "simple_python"}

# bfcl-eval's DEFAULT_USER_PROMPT_FOR_ADDITIONAL_FUNCTION_FC: the user turn that comes with held-out functions.
ADDED_FUNCTIONS_PROMPT = "I have updated some more functions you can choose from. What about now?"

INSTALL_HINT = (
    "bfcl-eval is not installed. Install the benchmark extra: scripts/install.sh bench "
    "(bfcl-eval pins numpy==1.26.4, which the script avoids; see the README)"
)


def require_bfcl() -> None:
    """Import check with a useful message; also points bfcl-eval's result/lock folders at cave's cache."""
    # bfcl-eval creates result/, score/ and .file_locks/ next to site-packages at import unless told otherwise.
    from cave.llm.models import cave_home

    root = cave_home() / "bfcl"
    root.mkdir(parents=True, exist_ok=True)
    os.environ.setdefault("BFCL_PROJECT_ROOT", str(root))
    try:
        import bfcl_eval.utils  # noqa: F401
    except ImportError as e:
        raise ImportError(f"{INSTALL_HINT} ({e})") from e


def file_category(category: str) -> str:
    """The category name in bfcl-eval's file names.

    >>> file_category("simple"), file_category("multi_turn_base")
    ('simple_python', 'multi_turn_base')
    """
    if category not in CATEGORIES and category not in ALIASES:
        raise ValueError(f"unknown BFCL category {category!r}; supported: {', '.join(CATEGORIES)}")
    return ALIASES.get(category, category)


def is_multi_turn(category: str) -> bool:
    return category.startswith("multi_turn")


@dataclass
class Entry:
    id: str
    category: str  # our name ("simple", "multi_turn_base", ...)
    turns: list[list[dict[str, Any]]]  # per turn: the messages (role, content)
    functions: list[dict[str, Any]]  # BFCL function docs
    answer: Any = None  # single-turn: list of {name: {param: [allowed values]}}; multi-turn: list[list[str]]
    raw: dict[str, Any] = field(default_factory=dict)  # the dataset entry as bfcl-eval loaded it

    @property
    def multi_turn(self) -> bool:
        return is_multi_turn(self.category)

    def turn_text(self, i: int) -> str:
        if self.holdout(i):  # miss_func: this turn only adds functions; bfcl-eval's harness says so in these words
            return ADDED_FUNCTIONS_PROMPT
        return "\n\n".join(str(m.get("content") or "") for m in self.turns[i] if m.get("role") == "user")

    @property
    def all_functions(self) -> list[dict[str, Any]]:
        """The function docs, held-out ones (miss_func) included."""
        held = [d for docs in (self.raw.get("missed_function") or {}).values() for d in docs]
        return self.functions + held

    def holdout(self, i: int) -> list[dict[str, Any]]:
        """miss_func: the function docs held out until turn ``i`` (empty for other turns and categories)."""
        return list((self.raw.get("missed_function") or {}).get(str(i), []))

    def system_text(self) -> str:
        return "\n\n".join(str(m.get("content") or "") for t in self.turns[:1] for m in t if m.get("role") == "system")


@cache
def _load(category: str) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    require_bfcl()
    from bfcl_eval.utils import load_dataset_entry, load_ground_truth_entry

    name = file_category(category)
    entries = load_dataset_entry(name)
    answers = {} if category == "irrelevance" else {a["id"]: a["ground_truth"] for a in load_ground_truth_entry(name)}
    return entries, answers


def load_category(category: str, limit: int | None = None, *, ids: list[str] | None = None) -> list[Entry]:
    """The entries of a category (the first ``limit``, or the given ``ids``), as fresh copies."""
    entries, answers = _load(category)
    chosen = [e for e in entries if ids is None or e["id"] in ids]
    if limit is not None:
        chosen = chosen[:limit]
    out = []
    for e in chosen:
        e = copy.deepcopy(e)
        out.append(
            Entry(
                id=e["id"],
                category=category,
                turns=e["question"],
                functions=e["function"],
                answer=copy.deepcopy(answers.get(e["id"])),
                raw=e,
            )
        )
    return out


def entry_by_id(entry_id: str) -> Entry:
    """One entry by its bfcl id (e.g. ``simple_python_3``, ``multi_turn_base_0``)."""
    for category in CATEGORIES:
        prefix = file_category(category)
        if entry_id.rsplit("_", 1)[0] == prefix:
            found = load_category(category, ids=[entry_id])
            if found:
                return found[0]
    raise KeyError(f"no BFCL entry {entry_id!r} in the supported categories ({', '.join(CATEGORIES)})")


# -- gold answers as concrete calls -----------------------------------------------------------------
def gold_calls(entry: Entry) -> list[dict[str, Any]] | list[list[dict[str, Any]]]:
    """Concrete calls from the possible answer: single-turn -> [{name, arguments}]; multi-turn -> per turn.

    Single-turn picks the first allowed value of each parameter and leaves out parameters whose
    first allowed value is "" (optional, may be omitted). Multi-turn parses the gold call strings
    and names positional arguments by the function doc's parameter order.
    """
    if entry.category == "irrelevance":
        return []
    if entry.multi_turn:
        return [[parse_call_string(s, entry.all_functions) for s in turn] for turn in entry.answer]
    calls = []
    for item in entry.answer:
        ((name, params),) = item.items()
        doc = next((f for f in entry.functions if f["name"] == name), None)
        documented = set(((doc or {}).get("parameters") or {}).get("properties") or {})
        args = {}
        for p, allowed in params.items():
            if doc is not None and p not in documented:
                continue  # a few possible answers name a parameter the function doc lacks; no call can pass it
            value = _first_allowed(allowed)
            if value is not _OMIT:
                args[p] = value
        calls.append({"name": name, "arguments": args})
    return calls


_OMIT = object()


def _first_allowed(allowed: list[Any]) -> Any:
    for v in allowed:
        if v == "" and isinstance(v, str):
            continue
        return _concrete(v)
    return _OMIT


def _concrete(v: Any) -> Any:
    """Possible answers nest allowed-value lists inside dicts; pick the first of each."""
    if isinstance(v, dict):
        out = {}
        for k, allowed in v.items():
            if isinstance(allowed, list):
                x = _first_allowed(allowed)
                if x is not _OMIT:
                    out[k] = x
            else:
                out[k] = allowed
        return out
    if isinstance(v, list):
        return [_concrete(x) if isinstance(x, dict) else x for x in v]
    return v


def parse_call_string(call: str, functions: list[dict[str, Any]]) -> dict[str, Any]:
    """``"mv(source='a', destination='b')"`` -> ``{"name": "mv", "arguments": {...}}``; positionals named by the doc.

    >>> docs = [{"name": "sort", "parameters": {"properties": {"file_name": {"type": "string"}}, "required": ["file_name"]}}]
    >>> parse_call_string("sort('report.pdf')", docs)
    {'name': 'sort', 'arguments': {'file_name': 'report.pdf'}}
    """
    node = ast.parse(call.strip(), mode="eval").body
    if not isinstance(node, ast.Call):
        raise ValueError(f"not a function call: {call!r}")
    name = ast.unparse(node.func)
    order = param_order(next((f for f in functions if f["name"] == name), None))
    args = {}
    for i, a in enumerate(node.args):
        if i >= len(order):
            raise ValueError(f"{call!r}: more positional arguments than {name} has parameters ({order})")
        args[order[i]] = ast.literal_eval(a)
    for kw in node.keywords:
        args[kw.arg] = ast.literal_eval(kw.value)
    return {"name": name, "arguments": args}


def param_order(doc: dict[str, Any] | None) -> list[str]:
    """Parameter names in call order: required ones first, then optional ones, each in doc order."""
    if doc is None:
        return []
    props = list((doc.get("parameters") or {}).get("properties") or {})
    required = set((doc.get("parameters") or {}).get("required") or [])
    return [p for p in props if p in required] + [p for p in props if p not in required]
