"""Checks on a run's outputs: ``success`` means the result is right, not only that final_answer was called.

A task (or an SDK caller) states what its outputs must look like; after ``final_answer`` the checks run inside the
runtime on the live objects (no copy crosses a process boundary), and a failed check goes back to the agent as an
observation so it can fix the result within ``max_steps``. A run whose last answer still fails ends with status
``failed_checks``.

    checks:
      by_region:                                   # a runtime variable; `answer` is the final answer
        columns: [region, revenue]
        sorted_by: {column: revenue, descending: true}
        rows: {min: 1}
        no_nulls: true
        unique: [region]
        assert: ["(value['revenue'] > 0).all()"]  # Python over `value` (and the runtime's variables)

``report(namespace, specs)`` is what runs in the runtime: plain Python (pandas only when the object is a
DataFrame), returning one line per failed check.

    >>> report({"x": [3, 1, 2]}, {"x": {"type": "list", "rows": {"min": 4}}})
    ['x: has 3 rows; expected at least 4']
    >>> report({"_final_answer": 7}, {"answer": {"type": "int", "assert": ["value % 2 == 1"]}})
    []
"""

from __future__ import annotations

import json
from typing import Any

from pydantic import ConfigDict, Field, field_validator

from cave.config import ConfigModel

__all__ = ["ANSWER", "CheckSpec", "RowRange", "SortSpec", "averify", "describe_check", "failed_checks_note", "report"]

ANSWER = "answer"  # the name that stands for the final answer
_FINAL_VAR = "_final_answer"  # where final_answer leaves the answer in the runtime (cave.cells.FINAL_VAR)
_KINDS = {"number", "integer", "float", "string", "datetime", "bool", "category"}


class RowRange(ConfigModel):
    min: int | None = Field(None, ge=0)
    max: int | None = Field(None, ge=0)


class SortSpec(ConfigModel):
    shorthand = "column"

    column: str
    descending: bool = False


class CheckSpec(ConfigModel):
    """What one output must look like. Every field is optional; only what is given is checked."""

    model_config = ConfigDict(populate_by_name=True)

    type: str | None = Field(
        None, description="type name: DataFrame, Series, list, dict, str, int, float, number, bool, ..."
    )
    columns: list[str] | None = Field(None, description="columns the DataFrame must have (others allowed)")
    exact_columns: bool = Field(False, description="with columns: no other columns, in this order")
    dtypes: dict[str, str] | None = Field(
        None, description="column -> number | integer | float | string | datetime | bool | category"
    )
    rows: RowRange | int | None = Field(None, description="an exact row count (len), or {min, max}")
    sorted_by: SortSpec | None = Field(None, description="a column (ascending), or {column, descending: true}")
    no_nulls: bool | list[str] = Field(False, description="true: no missing values anywhere; or these columns")
    unique: list[str] | None = Field(None, description="these columns together identify a row")
    equals: Any = Field(None, description="the expected value (numbers compared with a relative 1e-6)")
    asserts: list[str] = Field(
        default_factory=list,
        alias="assert",
        description="Python expressions over `value` (the object) and the runtime's variables; each must be true",
    )

    @field_validator("dtypes")
    @classmethod
    def _kinds(cls, v: dict[str, str] | None) -> dict[str, str] | None:
        for col, kind in (v or {}).items():
            if kind not in _KINDS:
                raise ValueError(f"dtypes.{col}: unknown kind {kind!r}; use one of: {', '.join(sorted(_KINDS))}")
        return v

    @field_validator("asserts")
    @classmethod
    def _compiles(cls, v: list[str]) -> list[str]:
        for expr in v:
            try:
                compile(expr, "<check>", "eval")
            except SyntaxError as e:
                raise ValueError(
                    f"assert {expr!r} is not a Python expression ({e.msg}); write e.g. value > 0"
                ) from None
        return v

    def wire(self) -> dict[str, Any]:
        """The JSON-ready form ``report`` takes."""
        return self.model_dump(mode="json", by_alias=True, exclude_defaults=True)


def describe_check(name: str, spec: CheckSpec) -> str:
    """The check in words, for the task prompt.

    >>> describe_check("by_region", CheckSpec(columns=["region", "revenue"], sorted_by={"column": "revenue", "descending": True}))
    '`by_region`: a DataFrame with columns region, revenue; sorted by revenue, highest first'
    """
    what = "the final answer" if name == ANSWER else f"`{name}`"
    parts = []
    if spec.columns:
        parts.append(f"a DataFrame with columns {', '.join(spec.columns)}" + (" only" if spec.exact_columns else ""))
    elif spec.type:
        parts.append(f"a {spec.type}")
    if spec.rows is not None:
        rows = spec.rows
        parts.append(
            f"{rows} rows" if isinstance(rows, int) else " and ".join(
                p for p in (f"at least {rows.min} rows" if rows.min is not None else "",
                            f"at most {rows.max} rows" if rows.max is not None else "") if p
            )
        )  # fmt: skip
    if spec.sorted_by:
        order = "highest first" if spec.sorted_by.descending else "lowest first"
        parts.append(f"sorted by {spec.sorted_by.column}, {order}")
    if spec.no_nulls:
        parts.append("no missing values")
    if spec.unique:
        parts.append(f"one row per {', '.join(spec.unique)}")
    if spec.dtypes:
        parts.append(", ".join(f"{c} {k}" for c, k in spec.dtypes.items()))
    if spec.equals is not None:
        parts.append(f"equal to {spec.equals!r}")
    parts += [f"`{e}` holds" for e in spec.asserts]
    return f"{what}: " + "; ".join(parts) if parts else f"{what} exists"


# -- inside the runtime ------------------------------------------------------------------------------------------
def report(namespace: dict[str, Any], specs: dict[str, dict[str, Any]] | str) -> list[str]:
    """Every failed check, as ``name: what is wrong`` (empty when all pass). Runs where the objects live."""
    if isinstance(specs, str):
        specs = json.loads(specs)
    failures: list[str] = []
    for name, spec in specs.items():
        var = _FINAL_VAR if name == ANSWER else name
        if var not in namespace:
            what = "final_answer(...) was not called" if name == ANSWER else f"no variable named {name!r}"
            failures.append(f"{name}: {what}; create it before calling final_answer")
            continue
        try:
            failures += [
                f"{name}: {f}" for f in _check(namespace[var], spec, namespace, var if name != ANSWER else None)
            ]
        except Exception as e:  # a check must report, never crash the run
            failures.append(f"{name}: the check itself failed ({type(e).__name__}: {e})")
    return failures


def _check(value: Any, spec: dict[str, Any], namespace: dict[str, Any], var: str | None = None) -> list[str]:
    """The failed checks of one object; ``var`` (its variable name) lets a message show the line that fixes it."""
    out: list[str] = []
    type_name = spec.get("type")
    if type_name and not _is_type(value, type_name):
        return [f"is a {type(value).__name__}; expected a {type_name}"]
    frame = value if hasattr(value, "columns") and hasattr(value, "iloc") else None
    if spec.get("columns") is not None:
        if frame is None:
            return [f"is a {type(value).__name__}; expected a DataFrame with columns {spec['columns']}"]
        cols = [str(c) for c in frame.columns]
        missing = [c for c in spec["columns"] if c not in cols]
        if missing:
            out.append(
                f"lacks column(s) {missing}; it has {cols}"
                + (
                    f"; if they are in the index, fix: {var} = {var}.reset_index()"
                    if var
                    else " (reset_index() turns an index into a column)"
                )
            )
        elif spec.get("exact_columns") and cols != list(spec["columns"]):
            out.append(f"has columns {cols}; expected exactly {spec['columns']}")
    for col, kind in (spec.get("dtypes") or {}).items():
        if frame is not None and col in frame.columns and not _dtype_is(frame[col], kind):
            out.append(f"column {col!r} is {frame[col].dtype}; expected {kind}")
    rows = spec.get("rows")
    if rows is not None:
        try:
            n = len(value)
        except TypeError:
            n = None
        lo, hi = (rows, rows) if isinstance(rows, int) else (rows.get("min"), rows.get("max"))
        if n is None:
            out.append(f"is a {type(value).__name__}, which has no rows")
        elif lo is not None and n < lo:
            out.append(f"has {n} rows; expected {'exactly' if lo == hi else 'at least'} {lo}")
        elif hi is not None and n > hi:
            out.append(f"has {n} rows; expected {'exactly' if lo == hi else 'at most'} {hi}")
    sort = spec.get("sorted_by")
    if sort and frame is not None:
        col, desc = sort["column"], sort.get("descending", False)
        if col not in frame.columns:
            out.append(f"cannot be sorted by {col!r}: no such column")
        else:
            series = frame[col].reset_index(drop=True)
            ok = series.is_monotonic_decreasing if desc else series.is_monotonic_increasing
            if not ok:
                how = (
                    f"{var} = {var}.sort_values({col!r}, ascending={not desc}).reset_index(drop=True)"
                    if var
                    else "sort_values"
                )
                out.append(f"is not sorted by {col!r} {'descending' if desc else 'ascending'}; fix: {how}")
    nulls = spec.get("no_nulls")
    if nulls and frame is not None:
        cols = list(frame.columns) if nulls is True else [c for c in nulls if c in frame.columns]
        bad = [str(c) for c in cols if frame[c].isna().any()]
        if bad:
            out.append(f"has missing values in {bad}")
    elif nulls and value is None:
        out.append("is None")
    unique = spec.get("unique")
    if unique and frame is not None:
        present = [c for c in unique if c in frame.columns]
        if present and frame.duplicated(subset=present).any():
            out.append(f"has duplicate rows for {present} (one row per {', '.join(present)} expected)")
    if "equals" in spec and not _equal(value, spec["equals"]):
        out.append(f"is {_short(value)}; expected {spec['equals']!r}")
    for expr in spec.get("assert") or []:
        try:
            ok = eval(expr, dict(namespace), {"value": value})  # noqa: S307 - the task author's own expression
        except Exception as e:
            out.append(f"assert {expr}: raised {type(e).__name__}: {e}")
            continue
        if not bool(ok):
            out.append(f"assert {expr}: is false")
    return out


def _is_type(value: Any, name: str) -> bool:
    import numbers

    if name == "number":
        return isinstance(value, numbers.Number) and not isinstance(value, bool)
    if name in ("int", "integer"):
        return isinstance(value, numbers.Integral) and not isinstance(value, bool)
    if name == "float":
        return isinstance(value, numbers.Real) and not isinstance(value, bool)
    return any(cls.__name__ == name for cls in type(value).__mro__)


def _dtype_is(series: Any, kind: str) -> bool:
    from pandas.api import types as t

    test = {
        "number": lambda s: t.is_numeric_dtype(s) and not t.is_bool_dtype(s),
        "integer": t.is_integer_dtype,
        "float": t.is_float_dtype,
        "string": lambda s: t.is_string_dtype(s) or t.is_object_dtype(s),
        "datetime": t.is_datetime64_any_dtype,
        "bool": t.is_bool_dtype,
        "category": lambda s: isinstance(s.dtype, __import__("pandas").CategoricalDtype),
    }[kind]
    return bool(test(series))


def _equal(value: Any, expected: Any) -> bool:
    import numbers

    if isinstance(expected, numbers.Real) and isinstance(value, numbers.Real) and not isinstance(value, bool):
        return abs(float(value) - float(expected)) <= 1e-6 * max(1.0, abs(float(expected)))
    return value == expected


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 80 else text[:77] + "..."


# -- on the host ---------------------------------------------------------------------------------------------------
async def averify(runtime: Any, specs: dict[str, CheckSpec]) -> list[str]:
    """Run the checks in ``runtime`` (any cave runtime); the failures, one line each."""
    import asyncio

    wire = json.dumps({name: spec.wire() for name, spec in specs.items()})
    code = f"print(__import__('json').dumps(__import__('cave.review.checks', fromlist=['report']).report(globals(), {wire!r})))"
    aexecute = getattr(runtime, "aexecute", None)
    ex = await aexecute(code, 60.0) if aexecute else await asyncio.to_thread(runtime.execute, code, 60.0)
    if ex.error is not None or ex.timed_out:
        reason = ex.error.message if ex.error else "timed out"
        return [f"the checks could not run in the runtime: {reason}"]
    try:
        return list(json.loads(ex.stdout.strip().splitlines()[-1]))
    except (ValueError, IndexError):
        return [f"the checks printed no result: {ex.stdout[-200:]!r}"]


def failed_checks_note(failures: list[str], answer: str | None = None) -> str:
    """What the agent is told when its answer fails a check.

    Checks that know the line that fixes them end with ``fix: <code>``; those lines are repeated as one code block
    (with ``final_answer(answer)`` when the answer was a plain variable), because a small model that sees its own
    previous cell tends to copy it, and copies a ready fix just as readily.

    >>> print(failed_checks_note(["t: is not sorted by 'n' descending; fix: t = t.sort_values('n', ascending=False)"], "t"))
    final_answer was NOT accepted: the result fails 1 check(s) of the task:
    - t: is not sorted by 'n' descending; fix: t = t.sort_values('n', ascending=False)
    The objects are still in the runtime: do not rebuild them. Run only the fix:
    ```python
    t = t.sort_values('n', ascending=False)
    final_answer(t)
    ```
    """
    lines = "\n".join(f"- {f}" for f in failures)
    head = f"final_answer was NOT accepted: the result fails {len(failures)} check(s) of the task:\n{lines}\n"
    fixes = [f.rsplit("; fix: ", 1)[1] for f in failures if "; fix: " in f]
    if not fixes:
        return head + "Fix the objects in the runtime (do not rebuild them from scratch), then call final_answer again."
    done = f"final_answer({answer})" if answer and answer.isidentifier() else "# then call final_answer again"
    body = "\n".join(dict.fromkeys(fixes))  # one line per distinct fix, in order
    return (
        head
        + f"The objects are still in the runtime: do not rebuild them. Run only the fix:\n```python\n{body}\n{done}\n```"
    )
