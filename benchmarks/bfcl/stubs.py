"""Recording stubs: Python functions generated from BFCL function docs that capture every call.

A code agent is scored on the calls it actually made, so each documented function becomes a
stub with a real signature (so ``describe()`` shows it and wrong calls fail like real ones):
positional and keyword arguments are both accepted, positionals are named by the doc's
parameter order, and only the arguments the code passed are recorded (an omitted optional
parameter stays omitted, as the checker expects). Single-turn stubs return a receipt;
multi-turn stubs run the call on the live BFCL backend instance and return its real result.

Captured calls are converted to the two formats bfcl-eval's checkers read:

- AST checker (single-turn): ``[{"name": {"param": value}}, ...]`` with JSON-like values;
- multi-turn checker: per turn, per step, a list of call strings ``"mv(source='a', destination='b')"``.

>>> doc = {"name": "math.hypot", "description": "Euclidean norm.", "parameters": {"type": "dict",
...        "properties": {"x": {"type": "integer"}, "y": {"type": "integer"}, "z": {"type": "integer"}},
...        "required": ["x", "y"]}}
>>> rec = Recorder()
>>> hypot = make_stub(doc, rec)
>>> hypot.__name__, str(inspect.signature(hypot))
('math_hypot', '(x: int, y: int, z: int = None)')
>>> _ = hypot(4, y=5)
>>> rec.calls
[{'name': 'math.hypot', 'arguments': {'x': 4, 'y': 5}}]
>>> to_ast_format(rec.calls), call_string(rec.calls[0])
([{'math.hypot': {'x': 4, 'y': 5}}], 'math.hypot(x=4, y=5)')
"""

from __future__ import annotations

import copy
import inspect
import keyword
import re
from collections.abc import Callable
from typing import Any

from cave.benchmarks.bfcl.data import param_order
from cave.benchmarks.json_agent import ToolSpec
from cave.benchmarks.runtime import bind_call

PY_TYPES: dict[str, Any] = {
    "integer": int,
    "float": float,
    "number": float,
    "string": str,
    "boolean": bool,
    "array": list,
    "tuple": list,
    "dict": dict,
    "object": dict,
    "any": Any,
}


class Recorder:
    """Collects calls, grouped in steps (one step = one code cell or one JSON tool-call message)."""

    def __init__(self) -> None:
        self.steps: list[list[dict[str, Any]]] = [[]]

    def new_step(self) -> None:
        if self.steps[-1]:
            self.steps.append([])

    def record(self, name: str, arguments: dict[str, Any]) -> None:
        # A copy: the backend may keep the very list it was given and mutate it later (a tweet's
        # mentions), which must not rewrite the call as it was made.
        self.steps[-1].append({"name": name, "arguments": copy.deepcopy(arguments)})

    @property
    def calls(self) -> list[dict[str, Any]]:
        return [c for step in self.steps for c in step]

    def step_calls(self) -> list[list[dict[str, Any]]]:
        return [s for s in self.steps if s]


def py_name(name: str) -> str:
    """A Python identifier for a BFCL function or parameter name (dots and other characters -> "_").

    >>> py_name("triangle_properties.get"), py_name("from"), py_name("2d-shape")
    ('triangle_properties_get', 'from_', '_2d_shape')
    """
    s = re.sub(r"\W", "_", name)
    if not s or s[0].isdigit():
        s = "_" + s
    return s + "_" if keyword.iskeyword(s) else s


def make_stub(
    doc: dict[str, Any],
    recorder: Recorder,
    impl: Callable[..., Any] | None = None,
    *,
    name: str | None = None,
) -> Callable[..., Any]:
    """A function named ``py_name(doc["name"])`` with the doc's signature that records each call.

    ``impl``, when given, is called with the recorded keyword arguments and its result returned
    (multi-turn: the live backend method); otherwise the stub returns a short receipt string.
    """
    fname = doc["name"]
    props: dict[str, Any] = (doc.get("parameters") or {}).get("properties") or {}
    required = set((doc.get("parameters") or {}).get("required") or [])
    to_schema: dict[str, str] = {}
    params = []
    for p in param_order(doc):
        spec = props.get(p) or {}
        pn = py_name(p)
        to_schema[pn] = p
        annotation = PY_TYPES.get(str(spec.get("type", "any")), Any)
        default = inspect.Parameter.empty if p in required else spec.get("default", None)
        params.append(
            inspect.Parameter(pn, inspect.Parameter.POSITIONAL_OR_KEYWORD, default=default, annotation=annotation)
        )
    sig = inspect.Signature(params)

    def stub(*args: Any, **kwargs: Any) -> Any:
        bound = bind_call(sig, stub.__name__, args, kwargs)
        arguments = {to_schema[k]: as_declared(normalize(v), props.get(to_schema[k]) or {}) for k, v in bound.items()}
        recorder.record(fname, arguments)
        if impl is not None:
            return impl(**arguments)
        shown = ", ".join(f"{k}={v!r}" for k, v in arguments.items())
        return f"recorded call {fname}({shown})"

    stub.__name__ = stub.__qualname__ = name or py_name(fname)
    stub.__signature__ = sig  # type: ignore[attr-defined]
    stub.__doc__ = _docstring(doc, to_schema, props)
    return stub


def _docstring(doc: dict[str, Any], to_schema: dict[str, str], props: dict[str, Any]) -> str:
    lines = [str(doc.get("description") or doc["name"]).strip()]
    if props:
        lines += ["", "Args:"]
        for pn, p in to_schema.items():
            spec = props.get(p) or {}
            extra = f" One of {spec['enum']}." if spec.get("enum") else ""
            lines.append(f"    {pn} ({spec.get('type', 'any')}): {spec.get('description', '')}{extra}".rstrip())
    return "\n".join(lines)


def param_notes(doc: dict[str, Any]) -> str | None:
    """The parameters' descriptions (and allowed values) on one line, for the code agent's function list: what
    the JSON agent reads in the tool schema (a unit "Default is 'cm'" the request overrides, an enum's values).

    >>> param_notes({"name": "f", "parameters": {"properties": {"unit": {"type": "string",
    ...     "description": "The unit. Default is 'cm'.", "enum": ["cm", "in"]}}}})
    "Parameters: unit (string): The unit. Default is 'cm'. One of ['cm', 'in']."
    """
    props: dict[str, Any] = (doc.get("parameters") or {}).get("properties") or {}
    notes = []
    for p in param_order(doc):
        spec = props.get(p) or {}
        text = " ".join(str(spec.get("description") or "").split())
        if spec.get("enum"):
            text += f" One of {spec['enum']}."
        if text.strip():
            notes.append(f"{py_name(p)} ({spec.get('type', 'any')}): {text.strip()}")
    return ("Parameters: " + "; ".join(notes)) if notes else None


def tool_spec(doc: dict[str, Any], fn: Callable[..., Any] | None = None) -> ToolSpec:
    """The same function doc as a JSON-schema tool for the JSON agent (names made OpenAI-safe)."""
    params = dict(doc.get("parameters") or {})
    params = _json_schema(params)
    return ToolSpec(name=py_name(doc["name"]), description=str(doc.get("description") or ""), parameters=params, fn=fn)


def _json_schema(schema: Any) -> Any:
    """BFCL docs say "dict"/"float"/"tuple"/"any"; JSON Schema says object/number/array/(no type)."""
    if isinstance(schema, dict):
        out = {k: _json_schema(v) for k, v in schema.items()}
        t = out.get("type")
        if t == "dict":
            out["type"] = "object"
        elif t == "float":
            out["type"] = "number"
        elif t == "tuple":
            out["type"] = "array"
        elif t == "any":
            out.pop("type")
        return out
    if isinstance(schema, list):
        return [_json_schema(v) for v in schema]
    return schema


def normalize(value: Any) -> Any:
    """Values as a JSON-speaking model would give them: tuples -> lists, numpy scalars -> Python.

    >>> normalize((1, (2, 3))), normalize({"a": (1,)})
    ([1, [2, 3]], {'a': [1]})
    """
    if isinstance(value, (list, tuple)):
        return [normalize(v) for v in value]
    if isinstance(value, dict):
        return {k: normalize(v) for k, v in value.items()}
    item = getattr(value, "item", None)
    if callable(item) and type(value).__module__ == "numpy":
        return item()
    return value


def as_declared(value: Any, spec: dict[str, Any]) -> Any:
    """An int where the schema declares a float (also inside an array) as the float Python would take it for:
    ``interval=[1, 3]`` for an array of floats is ``[1.0, 3.0]`` (PEP 484's numeric tower), as a JSON model
    writes it. Nothing else changes.

    >>> as_declared([1, 3], {"type": "array", "items": {"type": "float"}}), as_declared(2, {"type": "float"})
    ([1.0, 3.0], 2.0)
    >>> as_declared(True, {"type": "float"}), as_declared("1", {"type": "float"})
    (True, '1')
    """
    kind = spec.get("type")
    if kind == "float" and type(value) is int:
        return float(value)
    if kind in ("array", "tuple") and isinstance(value, list) and isinstance(spec.get("items"), dict):
        return [as_declared(v, spec["items"]) for v in value]
    return value


# -- conversion to the checkers' formats ----------------------------------------------------------
def to_ast_format(calls: list[dict[str, Any]]) -> list[dict[str, dict[str, Any]]]:
    """The AST checker's model output: one ``{name: {param: value}}`` per call."""
    return [{c["name"]: dict(c["arguments"])} for c in calls]


def call_string(call: dict[str, Any]) -> str:
    """The multi-turn checker's call format: keyword arguments as Python literals."""
    args = ", ".join(f"{k}={v!r}" for k, v in call["arguments"].items())
    return f"{call['name']}({args})"


def to_multi_turn_format(turns: list[list[list[dict[str, Any]]]]) -> list[list[list[str]]]:
    """Per turn, per step, the call strings."""
    return [[[call_string(c) for c in step] for step in turn] for turn in turns]


def written_calls(code: str, docs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The calls to documented functions that ``code`` writes, read from its text (not run).

    What BFCL's AST checker would see in a text reply: a cell that failed before or while making a call
    (an undefined name in its arguments, an earlier line that raised) still wrote that call. Arguments
    that are literals keep their value; any other argument keeps its source text. Positionals are named
    by the doc's parameter order.

    >>> docs = [{"name": "geo.area", "parameters": {"properties": {"w": {}, "h": {}}}}]
    >>> written_calls("x = 1\\ngeo_area(w, h=2)\\nprint(len('a'))", docs)
    [{'name': 'geo.area', 'arguments': {'w': 'w', 'h': 2}}]
    >>> written_calls("def f(:", docs)
    []
    """
    import ast

    by_py = {py_name(d["name"]): d for d in docs}
    try:
        tree = ast.parse(code)
    except SyntaxError:
        return []
    found = []
    for node in ast.walk(tree):
        if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in by_py):
            continue
        doc = by_py[node.func.id]
        names = param_order(doc)
        to_schema = {py_name(p): p for p in names}
        props = (doc.get("parameters") or {}).get("properties") or {}
        written = [(names[i] if i < len(names) else f"arg{i}", a) for i, a in enumerate(node.args)]
        written += [(to_schema.get(kw.arg, kw.arg), kw.value) for kw in node.keywords if kw.arg is not None]
        arguments = {k: as_declared(_literal(v), props.get(k) or {}) for k, v in written}
        found.append((node.lineno, node.col_offset, {"name": doc["name"], "arguments": arguments}))
    return [call for *_, call in sorted(found, key=lambda f: f[:2])]


def _literal(node: Any) -> Any:
    import ast

    try:
        return ast.literal_eval(node)
    except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
        return ast.unparse(node)
