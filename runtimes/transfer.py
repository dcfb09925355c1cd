"""Moving objects between the host and a kernel process, without base64-in-JSON.

``encode(value, directory)`` turns an object into ``(meta, attachment)``: ``meta`` is a
small JSON-able dict naming the format; the bytes travel either as ``attachment`` (a
raw binary frame after the JSON, for small objects) or, for large ones, in a file under
``directory`` (on Linux a ``/dev/shm`` directory, so it is memory, not disk) that the
receiver maps and deletes. ``decode(meta, attachment)`` rebuilds the object.

Formats:

- ``json``: plain values (None, bool, int, float, str, lists and str-keyed dicts of them).
- ``pickle5``: everything else picklable, by cloudpickle with protocol-5 out-of-band
  buffers: the NumPy / Arrow buffers of a DataFrame or an array are written once and
  mapped copy-on-write by the receiver (zero-copy on that side).
- ``recipe``: objects that cannot be pickled but can be rebuilt, e.g. a SQLAlchemy
  Engine re-created from its URL. ``register_recipe(type, fn)`` adds your own.
- ``arrow`` (DataFrames) and ``npy`` (arrays): the *safe* formats, with ``tjson``
  (tagged JSON; also a Series or DataFrame that Arrow cannot carry because an object
  column mixes plain values, such as a frame's row ``df.loc[i]``: it goes item by item).
  ``decode(..., trust=False)`` refuses pickles (unpickling runs arbitrary code) and
  recipes (rebuilding one opens the database the sender names); ``encode(..., safe=True)``
  produces only json / arrow / npy / named recipes, so data can be read from an untrusted
  kernel without executing anything it sent.

This module runs on both sides (the kernel imports it) and imports pandas, NumPy,
pyarrow and SQLAlchemy only when an object of theirs is being moved.
"""

from __future__ import annotations

import errno
import json
import math
import mmap
import os
import pickle
import secrets
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from cave.runtimes.arrow_payloads import read_arrow
from cave.runtimes.base import TransferError
from cave.runtimes.tagged import NoSafeForm, from_tagged, is_type, qualified_type, tagged_pandas, to_tagged

INLINE_LIMIT = 1 << 20  # bytes: smaller payloads ride in the message, larger ones go through a file
_ALIGN = 64  # buffer offsets in a payload file (NumPy and Arrow like aligned memory)
_JSON_MAX_ITEMS = 10_000


# -- recipes ---------------------------------------------------------------------------------


@dataclass
class Recipe:
    """How to rebuild an object on the other side: ``factory(*args, **kwargs)``.

    ``factory`` is a callable (shipped with cloudpickle: it must be importable or
    picklable by value) or the name of a built-in builder in ``BUILDERS`` (then the recipe
    is plain JSON, which an untrusted side may send too).
    """

    factory: Callable[..., Any] | str
    args: tuple[Any, ...] = ()
    kwargs: dict[str, Any] = field(default_factory=dict)


def _build_sqlalchemy_engine(url: str) -> Any:
    import sqlalchemy

    engine = sqlalchemy.create_engine(url)
    u = engine.url
    if u.get_backend_name() == "sqlite" and not _sqlite_in_memory(u) and not u.query.get("uri"):
        _require_database_file(str(u.database))
    return engine


def _build_sqlite3_connection(path: str) -> Any:
    import sqlite3

    if path not in ("", ":memory:") and not path.startswith("file:"):
        _require_database_file(path)
    return sqlite3.connect(path, check_same_thread=False)  # cells and transfers run on different threads


def _require_database_file(path: str) -> None:
    """A SQLite file the other side shares must be visible here: SQLite would create an empty one in its place
    (and the agent's first query would fail far from the cause)."""
    if not os.path.isfile(path):
        raise FileNotFoundError(
            f"the SQLite database {path} is not visible in this process; a sandbox shows only its working directory "
            "and ro_paths: put the file there, or create the runtime with ro_paths=[its folder]"
        )


# Builders a JSON recipe may name: nothing else can be called by a recipe from an untrusted side.
BUILDERS: dict[str, Callable[..., Any]] = {
    "sqlalchemy.create_engine": _build_sqlalchemy_engine,
    "sqlite3.connect": _build_sqlite3_connection,
}

_RECIPES: dict[type | str, Callable[[Any], Recipe]] = {}


def register_recipe(type_: type | str, fn: Callable[[Any], Recipe | tuple[Any, ...]]) -> None:
    """Teach the runtimes to move objects of ``type_`` that cannot be pickled.

    ``type_`` is a class or its qualified name (``"sqlalchemy.engine.base.Engine"``);
    subclasses match too. ``fn(obj)`` returns a ``Recipe`` (or a tuple ``(factory, args[,
    kwargs])``) that rebuilds an equivalent object in the other process. Recipes run on
    the side that sends: register on the host for inject(); the built-in ones also work
    for retrieve().

    Example (a client that holds a socket)::

        register_recipe(MyClient, lambda c: Recipe(MyClient, (c.host, c.port)))
    """
    if not (isinstance(type_, type | str)) or not callable(fn):
        raise TypeError("register_recipe(type_, fn): type_ is a class or 'module.Class', fn a callable(obj) -> Recipe")
    _RECIPES[type_] = fn


def find_recipe(obj: Any) -> Callable[[Any], Recipe | tuple[Any, ...]] | None:
    for cls in type(obj).__mro__:
        for key in (cls, f"{cls.__module__}.{cls.__qualname__}"):
            if key in _RECIPES:
                return _RECIPES[key]
    return None


def _as_recipe(made: Recipe | tuple[Any, ...]) -> Recipe:
    if isinstance(made, Recipe):
        return made
    if isinstance(made, tuple) and 1 <= len(made) <= 3:
        return Recipe(*made)
    raise TypeError(f"a recipe function must return Recipe(factory, args, kwargs), not {type(made).__name__}")


def _sqlite_in_memory(url: Any) -> bool:
    return url.database in (None, "", ":memory:") or "mode=memory" in str(url) or "memory" in url.query.get("mode", "")


def _engine_recipe(engine: Any) -> Recipe:
    url = engine.url
    if url.get_backend_name() == "sqlite" and _sqlite_in_memory(url):
        raise TransferError(
            f"cannot share the in-memory SQLite engine {url!r} with another process: an in-memory database "
            "lives inside one process, and the kernel would get a new, empty one. Use a file-backed URL "
            "(e.g. sqlite:////tmp/data.db), or the in-process runtime, which shares the live engine."
        )
    return Recipe("sqlalchemy.create_engine", (url.render_as_string(hide_password=False),))


register_recipe("sqlalchemy.engine.base.Engine", _engine_recipe)


def _sqlite3_recipe(con: Any) -> Recipe:
    """A sqlite3 connection to a file: the kernel opens its own connection to the same file."""
    rows = con.execute("PRAGMA database_list").fetchall()
    path = next((r[2] for r in rows if r[1] == "main"), "")
    if not path:
        raise TransferError(
            "cannot share an in-memory sqlite3 connection with another process (the kernel would get a new, empty "
            "database): connect to a file, or use the in-process runtime"
        )
    return Recipe("sqlite3.connect", (path,))


register_recipe("sqlite3.Connection", _sqlite3_recipe)


# -- encode ----------------------------------------------------------------------------------------


def _plain_json(value: Any, budget: list[int], depth: int = 0) -> bool:
    """True if JSON round-trips ``value`` exactly (types included)."""
    budget[0] -= 1
    if budget[0] < 0 or depth > 20:
        return False
    t = type(value)
    if t in (str, int, bool) or value is None:
        return True
    if t is float:
        return math.isfinite(value)
    if t is list:
        return all(_plain_json(v, budget, depth + 1) for v in value)
    if t is dict:
        return all(type(k) is str and _plain_json(v, budget, depth + 1) for k, v in value.items())
    return False


def encode(value: Any, directory: str, safe: bool = False) -> tuple[dict[str, Any], bytes]:
    """``(meta, attachment)`` for ``value``; large data is written to a new file in ``directory``.

    Raises TransferError (naming the type and the fix) when the object cannot be moved.
    """
    if _plain_json(value, [_JSON_MAX_ITEMS]):
        return {"format": "json", "value": value}, b""
    recipe_fn = find_recipe(value)
    if recipe_fn is not None:
        return _encode_recipe(value, recipe_fn, directory, safe)
    if safe:
        return _encode_safe(value, directory)
    return _encode_pickle(value, directory, recipe=False)


def _encode_recipe(value: Any, recipe_fn: Callable[..., Any], directory: str, safe: bool) -> tuple[dict, bytes]:
    try:
        recipe = _as_recipe(recipe_fn(value))
    except TransferError:
        raise
    except Exception as e:
        raise TransferError(f"the recipe for {qualified_type(value)} failed: {type(e).__name__}: {e}") from e
    if isinstance(recipe.factory, str):
        if recipe.factory not in BUILDERS:
            raise TransferError(f"recipe builder {recipe.factory!r} is unknown; known: {', '.join(BUILDERS)}")
        payload = {"builder": recipe.factory, "args": list(recipe.args), "kwargs": recipe.kwargs}
        if _plain_json(payload, [_JSON_MAX_ITEMS]):
            return {"format": "recipe", **payload}, b""
    if safe:
        raise TransferError(f"the recipe for {qualified_type(value)} is not plain JSON, so it cannot be sent safely")
    return _encode_pickle((recipe.factory, tuple(recipe.args), dict(recipe.kwargs)), directory, recipe=True)


def _encode_pickle(value: Any, directory: str, recipe: bool) -> tuple[dict[str, Any], bytes]:
    import cloudpickle

    buffers: list[pickle.PickleBuffer] = []
    try:
        main = cloudpickle.dumps(value, protocol=5, buffer_callback=buffers.append)
    except Exception as e:
        raise _not_picklable(value, e) from e
    views = [_raw(b) for b in buffers]
    layout, offset = [], 0
    for v in views:
        layout.append([offset, v.nbytes])
        offset += -(-v.nbytes // _ALIGN) * _ALIGN
    meta: dict[str, Any] = {"format": "pickle5", "main": [offset, len(main)], "buffers": layout, "recipe": recipe}
    if offset + len(main) <= INLINE_LIMIT:
        blob = bytearray(offset + len(main))
        for (start, n), v in zip(layout, views, strict=True):
            blob[start : start + n] = v
        blob[offset:] = main
        return meta, bytes(blob)
    meta["path"] = _write_parts(directory, [*zip((s for s, _ in layout), views, strict=True), (offset, main)])
    return meta, b""


def _raw(buf: pickle.PickleBuffer) -> memoryview:
    try:
        return buf.raw()
    except BufferError:  # not contiguous: copy it
        return memoryview(bytes(memoryview(buf)))


def _not_picklable(value: Any, e: Exception) -> TransferError:
    name = qualified_type(value)
    return TransferError(
        f"cannot copy an object of type {name} into another process: {type(e).__name__}: {e}. "
        f"Register a recipe that rebuilds it there: cave.runtimes.transfer.register_recipe({name!r}, "
        "lambda obj: Recipe(factory, args, kwargs)); or use the in-process runtime, which shares live objects."
    )


def new_path(directory: str, suffix: str) -> str:
    return os.path.join(directory, f"{secrets.token_hex(8)}{suffix}")


def _write_parts(directory: str, parts: list[tuple[int, Any]]) -> str:
    path = new_path(directory, ".bin")
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    try:
        with os.fdopen(fd, "wb") as f:
            for offset, data in parts:
                f.seek(offset)
                f.write(data)
    except OSError as e:
        _unlink(path)
        if e.errno == errno.ENOSPC:
            size = max(offset + len(memoryview(data)) for offset, data in parts) / 1e6
            raise TransferError(
                f"no space left in {directory} to stage a {size:.0f} MB payload (a small /dev/shm?): "
                "give the runtime a roomier transfer_dir, e.g. KernelRuntime(transfer_dir='/tmp')"
            ) from e
        raise
    except BaseException:
        _unlink(path)
        raise
    return path


def _encode_safe(value: Any, directory: str) -> tuple[dict[str, Any], bytes]:
    name = qualified_type(value)
    try:
        return {"format": "tjson", "value": to_tagged(value, [_JSON_MAX_ITEMS])}, b""
    except NoSafeForm:
        pass
    if is_type(value, "pandas", "Series") or is_type(value, "pandas", "DataFrame"):
        try:
            return _encode_arrow(value, directory)
        except TransferError as no_arrow:
            # Arrow wants one type per column; an object column of mixed plain values (a frame's row
            # ``df.loc[i]``: a name and a number) still has a safe form, item by item
            try:
                return {"format": "tjson", "value": tagged_pandas(value, _JSON_MAX_ITEMS)}, b""
            except NoSafeForm:
                raise no_arrow from no_arrow.__cause__
    one_column = _one_column_kind(value)
    if one_column is not None:  # df[col].unique() (a pandas array), df.index: a one-column Arrow file, rebuilt
        import pandas as pd

        name = value.name if one_column == "index" and isinstance(value.name, str | int | float) else None
        meta, attachment = _encode_arrow(pd.Series(value, name=name, copy=False).reset_index(drop=True), directory)
        return {**meta, "rebuild": one_column}, attachment
    if is_type(value, "numpy", "ndarray") and not value.dtype.hasobject:
        import numpy as np

        path = new_path(directory, ".npy")
        np.save(path, value, allow_pickle=False)
        return {"format": "npy", "path": path}, b""
    raise TransferError(
        f"an object of type {name} has no safe format (JSON, Arrow, npy): it can only be copied as a pickle, "
        "and pickles from an untrusted kernel are refused. Convert it (e.g. to a DataFrame or a dict) inside "
        "the kernel, or create the runtime with trust=True if you trust the code that ran there."
    )


def _one_column_kind(value: Any) -> str | None:
    """'array' for a pandas array (``df['city'].unique()`` of a text column: an ArrowStringArray; Int64, dates,
    categories), 'index' for a one-level pandas Index, None for anything else."""
    if is_type(value, "pandas", "ExtensionArray"):
        return "array"
    if is_type(value, "pandas", "Index") and getattr(value, "nlevels", 2) == 1:
        return "index"
    return None


def _encode_arrow(value: Any, directory: str) -> tuple[dict[str, Any], bytes]:
    """A DataFrame as an Arrow file; a Series as a one-column frame on the wire, a Series again on arrival."""
    if is_type(value, "pandas", "Series"):
        column = value.name if isinstance(value.name, str) else "__series__"
        meta, attachment = _encode_arrow(value.to_frame(name=column), directory)
        return {
            **meta,
            "series": True,
            "name": value.name if isinstance(value.name, str | int | float) else None,
        }, attachment
    import pyarrow as pa

    try:
        table = pa.Table.from_pandas(value)
    except Exception as e:
        raise TransferError(f"this DataFrame has no safe (Arrow) form: {type(e).__name__}: {e}") from e
    path = new_path(directory, ".arrow")
    with pa.OSFile(path, "wb") as sink, pa.ipc.new_file(sink, table.schema) as writer:
        writer.write_table(table)
    return {"format": "arrow", "path": path}, b""


# -- decode ----------------------------------------------------------------------------------------


def decode(meta: dict[str, Any], attachment: bytes = b"", trust: bool = True, validate: bool | None = None) -> Any:
    """Rebuild an object from ``encode``'s output; deletes the payload file, if any.

    With ``trust=False`` only json, tagged json, arrow and npy are accepted: not pickles (unpickling runs code), nor
    recipes (rebuilding one opens the database file or server it names, and imports its driver). ``validate``
    (default: ``not trust``) treats an Arrow payload as hostile input: see ``read_arrow``. Whatever goes wrong in
    rebuilding a payload of the safe formats is a TransferError.
    """
    validate = (not trust) if validate is None else validate
    fmt = meta.get("format")
    path = meta.get("path")
    try:
        if fmt == "pickle5":
            if not trust:
                raise TransferError(
                    "refusing to unpickle data from an untrusted kernel (unpickling can run arbitrary code). "
                    "Retrieve DataFrames, arrays or JSON-able values, or create the runtime with trust=True."
                )
            return _read_pickle(meta, attachment)
        return _decode_safe(fmt, meta, path, trust, validate)
    except (TransferError, MemoryError):
        raise
    except Exception as e:  # a payload this side cannot rebuild (malformed, or from a hostile writer): say so
        if fmt == "pickle5":
            raise
        raise TransferError(f"cannot rebuild the {fmt!r} payload: {type(e).__name__}: {str(e)[:300]}") from None
    finally:
        if isinstance(path, str) and path:
            _unlink(path)


def _decode_safe(fmt: Any, meta: dict[str, Any], path: Any, trust: bool, validate: bool) -> Any:
    if fmt == "json":
        return meta["value"]
    if fmt == "tjson":
        return from_tagged(meta["value"])
    if fmt == "recipe":
        builder = BUILDERS.get(meta.get("builder", ""))
        if builder is None:
            raise TransferError(f"unknown recipe builder {meta.get('builder')!r}")
        if not trust:
            raise TransferError(
                f"refusing to rebuild {meta.get('builder')}({str(meta.get('args'))[:200]}) from an untrusted kernel: "
                "it would open the database file or server the kernel names, on this side. Retrieve the data "
                "instead (e.g. a DataFrame of the query), or create the runtime with trust=True."
            )
        try:
            return builder(*meta.get("args", ()), **meta.get("kwargs", {}))
        except Exception as e:  # a bad URL, a file this side cannot see: the transfer failed, say why
            raise TransferError(f"cannot rebuild the object here: {type(e).__name__}: {e}") from None
    if fmt == "arrow":
        frame = read_arrow(_checked_path(path, meta), validate=validate)
        if meta.get("series"):
            if frame.shape[1] != 1:
                raise TransferError(f"a Series payload with {frame.shape[1]} columns")
            name = meta.get("name")
            if not (name is None or type(name) in (str, int, float, bool)):
                raise TransferError(f"a Series payload named by a {type(name).__name__}")
            series = frame.iloc[:, 0]
            series.name = name
            rebuild = meta.get("rebuild")
            if rebuild == "array":
                return series.array
            if rebuild == "index":
                import pandas as pd

                return pd.Index(series, name=name)
            return series
        return frame
    if fmt == "npy":
        import numpy as np

        return np.load(_checked_path(path, meta), allow_pickle=False)
    raise TransferError(f"unknown transfer format {fmt!r}")


def _checked_path(path: Any, meta: dict[str, Any]) -> str:
    if not isinstance(path, str):
        raise TransferError(f"transfer payload without a file: {meta}")
    return path


def _read_pickle(meta: dict[str, Any], attachment: bytes) -> Any:
    if "path" in meta:
        with open(meta["path"], "rb") as f:
            # Copy-on-write mapping: zero-copy, the arrays stay writable, and the file can be deleted now.
            view = memoryview(mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_COPY))
    else:
        view = memoryview(bytearray(attachment))  # writable buffers, not read-only arrays
    start, n = meta["main"]
    buffers = [view[o : o + k] for o, k in meta["buffers"]]
    value = pickle.loads(view[start : start + n], buffers=buffers)
    if meta.get("recipe"):
        factory, args, kwargs = value
        return factory(*args, **kwargs)
    return value


def _unlink(path: str) -> None:
    try:
        os.unlink(path)
    except FileNotFoundError:
        pass


# -- framing for the control channel -------------------------------------------------------------------

HEADER = 8  # two big-endian uint32: JSON length, attachment length


def pack(message: dict[str, Any], attachment: bytes = b"") -> bytes:
    body = json.dumps(message, separators=(",", ":")).encode()
    return len(body).to_bytes(4, "big") + len(attachment).to_bytes(4, "big") + body + attachment


def unpack_header(header: bytes) -> tuple[int, int]:
    return int.from_bytes(header[:4], "big"), int.from_bytes(header[4:8], "big")
