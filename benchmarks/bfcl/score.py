"""Scoring with bfcl-eval's own checkers (no re-implementation).

We call bfcl-eval's per-entry evaluation functions, the ones its ``bfcl evaluate`` runner
calls, with a pass-through "handler": our captured calls are already decoded, so decoding is
the identity. That keeps every rule of the official harness (format check, AST checker,
relevance rule, multi-turn state and response checks).

The multi-turn checker caches backend instances in a module-global dict by a name made of
the model name and the entry id, and reuses them on later calls with the same name. Scoring
the same entry twice in one process would therefore start the second replay from the first
one's final state. Every scored entry gets a unique id (``<id>-<hex>``; the category that the
checker derives from the id is unchanged) and its cached instances are dropped afterwards.
"""

from __future__ import annotations

import copy
import uuid
from typing import Any

from cave.benchmarks.bfcl.data import Entry, file_category, require_bfcl
from cave.benchmarks.bfcl.stubs import to_ast_format, to_multi_turn_format

# A bfcl-eval model entry whose names keep their dots (underscore_to_dot=False): our stubs
# record the documented names, so the checker must not rewrite them.
CHECKER_MODEL = "gorilla-openfunctions-v2"


class _Decoded:
    """bfcl-eval's runner decodes model text first; our calls are already structured."""

    def decode_ast(self, result: Any, *args: Any, **kwargs: Any) -> Any:
        return result

    def decode_execute(self, result: Any, *args: Any, **kwargs: Any) -> Any:
        return result


def _runner() -> Any:
    require_bfcl()
    from bfcl_eval.eval_checker import eval_runner

    return eval_runner


def score_single_turn(entry: Entry, calls: list[dict[str, Any]]) -> dict[str, Any]:
    """``{"valid": bool, ...error details}`` for simple / multiple / parallel / parallel_multiple / irrelevance."""
    runner = _runner()
    from bfcl_eval.constants.enums import Language, ReturnFormat

    prompt = copy.deepcopy(entry.raw)
    model_output = to_ast_format(calls)
    if entry.category == "irrelevance":
        return runner._evaluate_single_relevance_entry(
            _Decoded(), entry.id, model_output, prompt, CHECKER_MODEL, file_category(entry.category)
        )
    return runner._evaluate_single_ast_entry(
        _Decoded(),
        entry.id,
        model_output,
        copy.deepcopy(entry.answer),
        prompt,
        CHECKER_MODEL,
        file_category(entry.category),
        language=Language.PYTHON,
        return_format=ReturnFormat.PYTHON,
        has_tool_call_tag=False,
    )


def score_multi_turn(entry: Entry, turns: list[list[list[dict[str, Any]]]]) -> dict[str, Any]:
    """``turns``: per turn, per step, the captured calls. Replays model and gold calls on fresh backends."""
    runner = _runner()
    from bfcl_eval.eval_checker.multi_turn_eval import multi_turn_utils

    unique = f"{entry.id}-{uuid.uuid4().hex[:10]}"
    prompt = copy.deepcopy(entry.raw)
    prompt["id"] = unique
    try:
        return runner._evaluate_single_multi_turn_entry(
            _Decoded(),
            unique,
            to_multi_turn_format(turns),
            copy.deepcopy(entry.answer),
            prompt,
            CHECKER_MODEL,
            file_category(entry.category),
        )
    finally:
        token = unique.replace("-", "_")
        for name in [n for n in vars(multi_turn_utils) if token in n]:
            del vars(multi_turn_utils)[name]


def score(entry: Entry, captured: Any) -> dict[str, Any]:
    """Score captured calls: a flat call list (single-turn) or per-turn, per-step lists (multi-turn)."""
    if entry.multi_turn:
        return score_multi_turn(entry, captured)
    return score_single_turn(entry, captured)


def error_summary(result: dict[str, Any]) -> str:
    """A one-line reason from a checker result (empty when valid)."""
    if result.get("valid"):
        return ""
    err = result.get("error")
    if isinstance(err, dict):
        return str(err.get("error_message") or err.get("error_type") or err)[:300]
    if isinstance(err, list):
        return "; ".join(map(str, err))[:300]
    return str(err or result.get("error_type") or "invalid")[:300]
