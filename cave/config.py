"""The config-file toolkit shared by task files, team files, role files and train configs.

One way to read a YAML file a user wrote, and one shape for every problem in it::

    FILE:LINE: FIELD: what is wrong
      fix: what to do

``read_config(path)`` reads the file once, as bytes with a size cap, decodes it as UTF-8 (a clear error for UTF-16
or invalid bytes), and parses it with a loader that rejects duplicate keys (the later one would silently win),
limits YAML aliases (an alias bomb expands exponentially) and nesting depth; it returns the data with a map from
field paths to line numbers. ``validate(model, cfg)`` runs pydantic and turns its errors into ``ConfigError``
lines. ``ConfigModel`` is the base of the schemas: unknown fields are errors, numbers must be finite, and a
boolean is not a number.

    >>> cfg = parse_yaml("a: 1\\nb:\\n  - x\\n", "f.yaml")
    >>> cfg.data, cfg.line("b", "0")
    ({'a': 1, 'b': ['x']}, 3)
    >>> parse_yaml("a: 1\\na: 2\\n", "f.yaml")
    Traceback (most recent call last):
    ...
    cave.config.ConfigError: f.yaml:2: a: duplicate key `a` (first at line 1)
      fix: keep one `a:`; a YAML mapping cannot repeat a key (the later value would silently win)
"""

from __future__ import annotations

import difflib
import os
import stat
import types
import typing
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated, Any, ClassVar, TypeVar

import yaml
from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    ValidationError,
    ValidationInfo,
    field_validator,
    model_validator,
)

__all__ = [
    "ConfigError",
    "ConfigFile",
    "ConfigModel",
    "explain",
    "parse_yaml",
    "problem",
    "read_config",
    "registered",
    "unknown_field_fix",
    "validate",
]

MAX_BYTES = 4 * 1024 * 1024  # a config file is text a person wrote; anything bigger is a mistake
MAX_ALIASES = 64  # YAML anchors are handy for sharing a block; thousands of them are an alias bomb
MAX_DEPTH = 64  # nesting deeper than this is no config anyone writes (and blows the recursion limit)

M = TypeVar("M", bound=BaseModel)


class ConfigError(Exception):
    """A config file is wrong. ``problems`` are ``FILE:LINE: FIELD: problem`` + ``\\n  fix: ...`` strings."""

    def __init__(self, problems: Sequence[str]) -> None:
        self.problems = list(problems)
        super().__init__("\n".join(self.problems))


def problem(file: str, line: int | str | None, field_name: str | None, message: str, fix: str) -> str:
    """One problem in the house format.

    >>> problem("t.yaml", 3, "max_steps", "must be at least 1", "give a positive number")
    't.yaml:3: max_steps: must be at least 1\\n  fix: give a positive number'
    """
    where = f"{file}:{line or 1}"
    return f"{where}: {field_name}: {message}\n  fix: {fix}" if field_name else f"{where}: {message}\n  fix: {fix}"


def unknown_field_fix(name: str, known: list[str]) -> str:
    """The fix for a misspelt or unknown field.

    >>> unknown_field_fix("max_step", ["max_steps", "seed"])
    'did you mean `max_steps`? known fields here: max_steps, seed'
    """
    close = difflib.get_close_matches(name, known, n=1)
    return (f"did you mean `{close[0]}`? " if close else "remove it; ") + "known fields here: " + ", ".join(known)


# -- reading ---------------------------------------------------------------------------------------------------
@dataclass
class ConfigFile:
    """A parsed config file: its data and the line of every field (for errors found later)."""

    name: str  # the path as the user gave it, for messages
    data: Any
    lines: dict[tuple[str, ...], int] = field(default_factory=dict)
    path: Path | None = None

    def line(self, *loc: str) -> int:
        """The line of the deepest known prefix of ``loc`` (1 when nothing matches)."""
        for n in range(len(loc), 0, -1):
            if loc[:n] in self.lines:
                return self.lines[loc[:n]]
        return 1

    def where(self, *loc: str) -> str:
        return f"{self.name}:{self.line(*loc)}"


def read_config(
    path: str | Path, *, what: str = "config file", example: str = "", error: type[ConfigError] = ConfigError
) -> ConfigFile:
    """Read and parse a YAML file a user gave. Every failure is ``error`` in the house format, never a traceback
    or a hang (a FIFO or a device is refused before it is opened)."""
    path = Path(path)
    name = str(path)
    try:
        st = os.stat(path)
    except OSError as e:
        fix = f"give the path of a {what}" + (f" ({example})" if example else "")
        msg = f"no such {what}" if isinstance(e, FileNotFoundError) else f"cannot read: {e.strerror or e}"
        raise error([problem(name, None, None, msg, fix)]) from None
    if not stat.S_ISREG(st.st_mode):
        kind = "a directory" if stat.S_ISDIR(st.st_mode) else "not a regular file"
        raise error([problem(name, None, None, f"is {kind}", f"give the path of a {what} (a YAML file)")])
    if st.st_size > MAX_BYTES:
        raise error(
            [problem(name, None, None, f"is {st.st_size:,} bytes", f"a {what} is at most {MAX_BYTES:,} bytes of YAML")]
        )
    try:
        with open(path, "rb") as f:
            raw = f.read(MAX_BYTES + 1)
    except OSError as e:
        raise error(
            [problem(name, None, None, f"cannot read: {e.strerror or e}", "check the file's permissions")]
        ) from None
    cfg = parse_yaml(decode(raw, name, error), name, error)
    cfg.path = path.resolve()
    return cfg


def decode(raw: bytes, name: str, error: type[ConfigError] = ConfigError) -> str:
    """UTF-8 text of a file, or an error that says which encoding it is in and where it breaks.

    >>> decode(b"a: 1", "f")
    'a: 1'
    >>> decode("a: 1".encode("utf-16"), "f")
    Traceback (most recent call last):
    ...
    cave.config.ConfigError: f:1: the file is UTF-16 text
      fix: save it as UTF-8 (most editors: 'Save with encoding')
    """
    if raw.startswith((b"\xff\xfe", b"\xfe\xff")) or (len(raw) > 1 and raw[1:2] == b"\x00" and raw[0:1] != b"\x00"):
        raise error(
            [
                problem(
                    name, None, None, "the file is UTF-16 text", "save it as UTF-8 (most editors: 'Save with encoding')"
                )
            ]
        )
    try:
        text = raw.decode("utf-8-sig")
    except UnicodeDecodeError as e:
        line = raw[: e.start].count(b"\n") + 1
        raise error(
            [
                problem(
                    name,
                    line,
                    None,
                    f"byte {raw[e.start]:#04x} at offset {e.start} is not UTF-8",
                    "save the file as UTF-8",
                )
            ]
        ) from None
    if "\x00" in text:
        line = text[: text.index("\x00")].count("\n") + 1
        raise error([problem(name, line, None, "the file contains a NUL byte (binary data?)", "give a YAML text file")])
    return text


def parse_yaml(text: str, name: str = "<config>", error: type[ConfigError] = ConfigError) -> ConfigFile:
    """Parse YAML text into data + line map, with duplicate keys, alias bombs and deep nesting refused."""
    loader = _StrictLoader(text)
    try:
        node = loader.get_single_node()
        data = loader.construct_document(node) if node is not None else None
    except _Refused as e:
        raise error([problem(name, e.line, e.field, e.message, e.fix)]) from None
    except yaml.MarkedYAMLError as e:
        mark = e.problem_mark or e.context_mark
        line = f"{mark.line + 1}:{mark.column + 1}" if mark else "1"
        detail = " ".join(p for p in (e.context, e.problem) if p)
        raise error(
            [f"{name}:{line}: YAML syntax error: {detail}\n  fix: check the indentation and quoting near that line"]
        ) from None
    except yaml.YAMLError as e:
        raise error([problem(name, None, None, f"not valid YAML: {e}", "check the file's syntax")]) from None
    except RecursionError:
        raise error(
            [problem(name, None, None, "nested too deeply", f"a config nests at most {MAX_DEPTH} levels")]
        ) from None
    finally:
        loader.dispose()
    return ConfigFile(name, data, line_map(node))


class _Refused(Exception):
    def __init__(self, line: int, field_name: str | None, message: str, fix: str) -> None:
        super().__init__(message)
        self.line, self.field, self.message, self.fix = line, field_name, message, fix


class _StrictLoader(yaml.SafeLoader):
    """SafeLoader that counts aliases, bounds depth and rejects duplicate keys (PyYAML keeps the last one)."""

    def __init__(self, stream: str) -> None:
        super().__init__(stream)
        self._aliases = 0
        self._depth = 0

    def compose_node(self, parent: Any, index: Any) -> Any:
        if self.check_event(yaml.AliasEvent):
            self._aliases += 1
            if self._aliases > MAX_ALIASES:
                line = self.peek_event().start_mark.line + 1
                raise _Refused(
                    line,
                    None,
                    f"more than {MAX_ALIASES} YAML aliases (*name)",
                    "write the values out, or share fewer blocks",
                )
            return super().compose_node(parent, index)
        self._depth += 1
        try:
            if self._depth > MAX_DEPTH:
                line = self.peek_event().start_mark.line + 1
                raise _Refused(line, None, "nested too deeply", f"a config nests at most {MAX_DEPTH} levels")
            return super().compose_node(parent, index)
        finally:
            self._depth -= 1

    def construct_mapping(self, node: Any, deep: bool = False) -> Any:
        if isinstance(node, yaml.MappingNode):
            seen: dict[Any, int] = {}
            for key_node, _ in node.value:
                if key_node.tag == "tag:yaml.org,2002:merge":
                    continue
                key = self.construct_object(key_node, deep=True)
                try:
                    hash(key)
                except TypeError:
                    raise _Refused(
                        key_node.start_mark.line + 1, None, "a mapping key must be a plain value", "use a string key"
                    ) from None
                line = key_node.start_mark.line + 1
                if key in seen:
                    raise _Refused(
                        line,
                        str(key),
                        f"duplicate key `{key}` (first at line {seen[key]})",
                        f"keep one `{key}:`; a YAML mapping cannot repeat a key (the later value would silently win)",
                    )
                seen[key] = line
        return super().construct_mapping(node, deep=deep)


def line_map(node: Any, prefix: tuple[str, ...] = ()) -> dict[tuple[str, ...], int]:
    """Field path -> 1-based line of its key (mappings) or item (sequences), from a composed YAML node.

    Nodes shared through aliases are walked once, so the map stays as small as the text.
    """
    out: dict[tuple[str, ...], int] = {}
    seen: set[int] = set()
    stack: list[tuple[Any, tuple[str, ...]]] = [(node, prefix)]
    while stack:
        n, pre = stack.pop()
        if n is None or id(n) in seen:
            continue
        seen.add(id(n))
        if isinstance(n, yaml.MappingNode):
            for key, value in n.value:
                loc = (*pre, str(key.value))
                out.setdefault(loc, key.start_mark.line + 1)
                stack.append((value, loc))
        elif isinstance(n, yaml.SequenceNode):
            for i, item in enumerate(n.value):
                loc = (*pre, str(i))
                out.setdefault(loc, item.start_mark.line + 1)
                stack.append((item, loc))
    return out


# -- validating ----------------------------------------------------------------------------------------------
class ConfigModel(BaseModel):
    """Base of config schemas: unknown fields are errors, numbers are finite, ``true`` is not a number.

    ``shorthand`` names the field a bare string stands for: with ``shorthand = "kind"``, ``runtime: kernel``
    means ``runtime: {kind: kernel}``.
    """

    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)
    shorthand: ClassVar[str | None] = None

    @model_validator(mode="before")
    @classmethod
    def _expand_shorthand(cls, data: Any) -> Any:
        return {cls.shorthand: data} if cls.shorthand and isinstance(data, str) else data

    @field_validator("*", mode="before")
    @classmethod
    def _no_bool_as_number(cls, v: Any, info: ValidationInfo) -> Any:
        if isinstance(v, bool) and info.field_name in cls.model_fields:
            if _wants_number_not_bool(cls.model_fields[info.field_name].annotation):
                raise ValueError(f"{str(v).lower()} is a boolean, not a number; give a number")
        return v


def registered(registry: Any) -> Any:
    """A ``str`` field type whose value must be a name in ``registry`` (a cave.registry.Registry): the error lists
    the known names and the closest one.

        kind: registered(RUNTIMES) = "inprocess"
    """
    return Annotated[str, AfterValidator(registry.check)]


def _wants_number_not_bool(annotation: Any) -> bool:
    args = _flatten(annotation)
    return bool(args & {int, float}) and bool not in args


def _flatten(annotation: Any) -> set[Any]:
    origin = typing.get_origin(annotation)
    if origin in (typing.Union, types.UnionType):
        return set().union(*(_flatten(a) for a in typing.get_args(annotation)))
    if origin is typing.Annotated:
        return _flatten(typing.get_args(annotation)[0])
    return {annotation}


FixFor = Callable[[Mapping[str, Any], tuple[str, ...]], str | None]


def validate(
    model: type[M],
    cfg: ConfigFile,
    *,
    context: Mapping[str, Any] | None = None,
    prefix: tuple[str, ...] = (),
    nested: Mapping[str, type[BaseModel]] | None = None,
    examples: Mapping[str, str] | None = None,
    error: type[ConfigError] = ConfigError,
) -> M:
    """``model.model_validate(cfg.data)``, with every pydantic error turned into one line of ``error``."""
    try:
        return model.model_validate(cfg.data, context=dict(context or {}))
    except ValidationError as e:
        raise error(
            [explain(err, cfg, model, prefix=prefix, nested=nested, examples=examples) for err in e.errors()]
        ) from None


def explain(
    err: Mapping[str, Any],
    cfg: ConfigFile,
    model: type[BaseModel],
    *,
    prefix: tuple[str, ...] = (),
    nested: Mapping[str, type[BaseModel]] | None = None,
    examples: Mapping[str, str] | None = None,
    loc_in_message: Callable[[str], tuple[tuple[str, ...], str] | None] | None = None,
) -> str:
    """One pydantic error as ``FILE:LINE: FIELD: problem`` + ``fix:``.

    Validators phrase messages as ``problem; fix``. A cross-field check may name the exact field at the start of
    its message (``roles.0.output: ...``); ``loc_in_message`` extracts it. ``nested`` maps a field name to the
    model its entries are (for the list of known fields of an unknown-field error).
    """
    # pydantic puts tagged-union/validator names in loc; keep the keys that are in the file
    loc = prefix + tuple(str(p) for p in err["loc"] if not str(p).startswith("function-"))
    msg = str(err["msg"]).removeprefix("Value error, ")
    if loc_in_message is not None:
        found = loc_in_message(msg)
        if found:
            loc, msg = prefix + found[0], found[1]
    line = cfg.line(*loc)
    field_name = ".".join(loc) or "(top level)"
    kind = err["type"]
    if kind == "missing":
        example = (examples or {}).get(loc[-1], f"{loc[-1]}: ...")
        fix = f"add `{example}`" + (f" under `{'.'.join(loc[:-1])}`" if len(loc) > 1 else "")
        msg = "required field is missing"
    elif kind == "extra_forbidden":
        parent = next((nested[p] for p in reversed(loc[:-1]) if nested and p in nested), model)
        fix = unknown_field_fix(loc[-1], list(parent.model_fields))
        msg = f"unknown field `{loc[-1]}`"
    elif kind == "finite_number":
        fix = "give a finite number"
        msg = f"{err.get('input')!r} is not a finite number"
    elif kind == "literal_error":
        fix = msg
        msg = f"invalid value {err.get('input')!r}"
    elif "; " in msg:
        msg, fix = msg.split("; ", 1)
    elif "input" in err and not isinstance(err.get("input"), dict | list):
        fix = f"got {err.get('input')!r}"
    else:
        fix = "see the field's description (`cave schema` for task files)"
    return f"{cfg.name}:{line}: {field_name}: {msg}\n  fix: {fix}"
