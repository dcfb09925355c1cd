"""The domain tools as the code agent reads them: whole Python signatures with their docstrings.

cave lists a runtime's functions in the system prompt by their *preview* (``runtimes/describe.py``): signature and
first docstring line, clipped to ``MAX_PREVIEW`` (300) characters. tau2's tools have long signatures (airline's
``book_reservation``: 11 parameters, 477 characters with its module-qualified types) and keep what each argument
means, and the keys of the objects they take, in the docstring and the JSON schema: the preview cut
``book_reservation`` after ``passengers`` and showed no tool's arguments. So the code agent's instructions carry
the tools themselves (``render_tools``): one ``def`` stub per tool with short type names and its whole docstring,
then the fields of the object types the arguments take (from the tool's JSON schema, as the JSON agent gets them).
The functions injected into the runtime get a plain signature (``plain_signature``: the same parameters, no
annotations) and the docstring's first sentence (``summary``) so cave's own list names each tool once in a line
that fits, instead of a clipped copy.

>>> short_type("typing.List[tau2.domains.airline.data_model.FlightInfo | dict]")
'List[FlightInfo | dict]'
>>> def book(user_id: str, insurance: str = "no") -> dict: ...
>>> str(plain_signature(inspect.signature(book)))
"(user_id, insurance='no')"
"""

from __future__ import annotations

import inspect
import re
import typing
from typing import Any

_QUALIFIED = re.compile(r"\b(?:[A-Za-z_]\w*\.)+([A-Za-z_]\w*)")

HEADER = """\
## Tools
Call these as Python functions with keyword arguments. Pass objects (the types under "Argument objects") as dicts
with the keys listed there. A tool returns its result as Python data (dicts and lists); a refused call raises
ToolError with the reason."""


def short_type(annotation: Any) -> str:
    """An annotation as text, without module paths or ``Annotated`` metadata."""
    if typing.get_origin(annotation) is typing.Annotated:
        annotation = typing.get_args(annotation)[0]
    text = annotation if isinstance(annotation, str) else inspect.formatannotation(annotation)
    return _QUALIFIED.sub(r"\1", text)


def signature_text(name: str, sig: inspect.Signature) -> str:
    params = []
    for p in sig.parameters.values():
        text = p.name if p.annotation is p.empty else f"{p.name}: {short_type(p.annotation)}"
        if p.default is not p.empty:
            text += f" = {p.default!r}"
        params.append(text)
    returns = "" if sig.return_annotation is sig.empty else f" -> {short_type(sig.return_annotation)}"
    return f"def {name}({', '.join(params)}){returns}:"


def plain_signature(sig: inspect.Signature) -> inspect.Signature:
    """The same parameters (names, kinds, defaults: a call binds the same) without annotations."""
    params = [p.replace(annotation=inspect.Parameter.empty) for p in sig.parameters.values()]
    return sig.replace(parameters=params, return_annotation=inspect.Signature.empty)


def summary(tool: Any) -> str:
    """The docstring's first sentence: the doc of the injected function, shown in cave's one-line list."""
    doc = inspect.cleandoc(inspect.getdoc(tool) or tool._get_description() or "")
    first = doc.split("\n\n")[0].replace("\n", " ")
    return re.split(r"(?<=[.!?])\s", first, maxsplit=1)[0]


def render_tool(tool: Any) -> str:
    doc = inspect.cleandoc(inspect.getdoc(tool) or tool._get_description() or "")
    body = "\n".join(f"    {line}" if line else "" for line in doc.splitlines())
    return f'{signature_text(tool.name, inspect.signature(tool))}\n    """{body.lstrip()}\n    """'


def object_types(tools: list[Any]) -> dict[str, dict[str, Any]]:
    """The object types the tools' arguments take (JSON schema ``$defs``), by name, first seen first."""
    out: dict[str, dict[str, Any]] = {}
    for t in tools:
        for name, schema in (t.params.model_json_schema().get("$defs") or {}).items():
            out.setdefault(name, schema)
    return out


def _field_type(schema: dict[str, Any]) -> str:
    if "$ref" in schema:
        return schema["$ref"].rsplit("/", 1)[-1]
    if "enum" in schema:
        return " | ".join(repr(v) for v in schema["enum"])
    if "anyOf" in schema:
        return " | ".join(_field_type(s) for s in schema["anyOf"])
    kind = schema.get("type", "any")
    if kind == "array":
        return f"list[{_field_type(schema.get('items', {}))}]"
    return {"string": "str", "integer": "int", "number": "float", "boolean": "bool", "object": "dict"}.get(kind, kind)


def render_object(name: str, schema: dict[str, Any]) -> str:
    required = set(schema.get("required", []))
    lines = [f"- {name}: a dict with"]
    for key, field in (schema.get("properties") or {}).items():
        what = f"    {key!r}: {_field_type(field)}" + ("" if key in required else " (optional)")
        if field.get("description"):
            what += f" - {' '.join(field['description'].split())}"
        lines.append(what)
    return "\n".join(lines)


def render_tools(tools: list[Any]) -> str:
    """The tools section of the code agent's instructions: every tool whole, then the argument objects."""
    parts = [HEADER, "```python\n" + "\n\n".join(render_tool(t) for t in tools) + "\n```"]
    objects = object_types(tools)
    if objects:
        parts.append("Argument objects:\n" + "\n".join(render_object(n, s) for n, s in objects.items()))
    return "\n\n".join(parts)
