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
import re
import secrets
import struct
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

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


def read_arrow(path: str, validate: bool) -> Any:
    """A DataFrame from an Arrow IPC file. Zero-copy (memory-mapped) from a trusted writer; with ``validate`` the
    file is hostile input and the host:

    - copies the bytes first, so the writer (a kernel that kept an mmap of the file) cannot change offsets
      between the checks and the use;
    - refuses compressed buffers: a few kB of zstd can expand to GBs inside the host, and cave's own encoder
      never compresses;
    - accepts only time zones that are IANA names or fixed offsets (a name such as ``dateutil/<path>`` made
      pandas open a file the writer chose), at any depth of the schema (a list of timestamps too);
    - rebuilds pandas' metadata from an allow-list (``_clean_pandas_metadata``): pandas and pyarrow parse dtype
      strings, time zones and index descriptions from it, and a dtype string can name a file (``datetime64[ns,
      dateutil/<path>]``) or a huge NumPy type;
    - runs Arrow's full validation before pandas touches the data, and reports any failure of the conversion as
      TransferError.
    """
    import pyarrow as pa

    _pandas_arrow_types()
    if not validate:
        with pa.memory_map(path) as source:
            return pa.ipc.open_file(source).read_all().to_pandas()
    with open(path, "rb") as f:
        data = pa.py_buffer(f.read())  # a private copy: nothing outside this process can change it now
    try:
        _refuse_compression(data)
        table = pa.ipc.open_file(data).read_all()
        _check_time_zones(table.schema)
        table = table.replace_schema_metadata(_clean_schema_metadata(table.schema))
        table.validate(full=True)
        return table.to_pandas()
    except (TransferError, MemoryError):
        raise
    except Exception as e:  # malformed IPC or metadata: pyarrow's or pandas' own error, never a crash
        raise TransferError(f"the kernel's Arrow payload is malformed: {type(e).__name__}: {str(e)[:300]}") from None


def _pandas_arrow_types() -> None:
    """Register pandas' Arrow extension types (period, interval) in this process before a payload is read.

    pandas registers them only when it writes one (``Table.from_pandas``); a host that only reads got the
    storage type instead: a PeriodIndex of months came back as the integers 660, 661, ... (months since 1970).
    """
    try:
        import pandas.core.arrays.arrow.extension_types  # noqa: F401  (registers on import)
    except ImportError:  # another pandas layout: the payload is read without them, as before
        pass


_ARROW_MAGIC = b"ARROW1"


def _refuse_compression(data: Any) -> None:
    """TransferError if any record batch of an Arrow IPC file has compressed buffers (read from the message
    headers, before anything is decompressed)."""
    import pyarrow as pa

    raw = data.to_pybytes()[:8]
    if not raw.startswith(_ARROW_MAGIC):
        raise TransferError("the kernel's payload is not an Arrow IPC file")
    for message in pa.ipc.MessageReader.open_stream(pa.BufferReader(data.slice(8))):
        if message.type in ("record batch", "dictionary batch") and _flatbuffer_compressed(
            message.metadata.to_pybytes(), dictionary=message.type == "dictionary batch"
        ):
            raise TransferError(
                "the kernel's Arrow payload has compressed buffers, which could expand without bound in the host; "
                "refused (cave's own transfer never compresses: write the frame with the runtime's retrieve)"
            )


def _flatbuffer_compressed(meta: bytes, dictionary: bool) -> bool:
    """Whether an IPC Message's RecordBatch (or a DictionaryBatch's data) has its ``compression`` field set.

    Message {version: 0, header_type: 1, header: 2, ...}; RecordBatch {length: 0, nodes: 1, buffers: 2,
    compression: 3}; DictionaryBatch {id: 0, data: 1, isDelta: 2} (Arrow's Message.fbs / Schema.fbs).
    """

    def u32(pos: int) -> int:
        return struct.unpack_from("<I", meta, pos)[0]

    def field(table: int, index: int) -> int:
        """The absolute position of a table's field, or 0 when absent."""
        vtable = table - struct.unpack_from("<i", meta, table)[0]
        vlen = struct.unpack_from("<H", meta, vtable)[0]
        entry = 4 + 2 * index
        rel = struct.unpack_from("<H", meta, vtable + entry)[0] if entry < vlen else 0
        return table + rel if rel else 0

    def table_at(table: int, index: int) -> int:
        pos = field(table, index)
        return pos + u32(pos) if pos else 0

    try:
        message = u32(0)
        batch = table_at(message, 2)
        if batch and dictionary:
            batch = table_at(batch, 1)
        return bool(batch and field(batch, 3))
    except struct.error:
        raise TransferError("the kernel's Arrow payload has a malformed message header") from None


def _check_time_zones(schema: Any) -> None:
    """TransferError if a timestamp type anywhere in the schema (a list's items, a struct's fields, a map, a
    dictionary's values, an extension's storage) names a time zone that is not an IANA name or a fixed offset."""
    for f in schema:
        for tz in _time_zones(f.type):
            if not _known_time_zone(tz):
                raise TransferError(f"the kernel's Arrow payload names an unknown time zone {str(tz)[:80]!r}; refused")


def _time_zones(arrow_type: Any, depth: int = 0) -> list[str]:
    import pyarrow as pa

    if depth > 64:
        raise TransferError("the kernel's Arrow payload nests its types too deeply; refused")
    if pa.types.is_timestamp(arrow_type):
        return [arrow_type.tz] if arrow_type.tz else []
    children = []
    if isinstance(arrow_type, pa.BaseExtensionType):
        children = [arrow_type.storage_type]
    elif pa.types.is_dictionary(arrow_type):
        children = [arrow_type.index_type, arrow_type.value_type]
    elif pa.types.is_map(arrow_type):
        children = [arrow_type.key_type, arrow_type.item_type]
    elif hasattr(arrow_type, "value_type"):  # list, large list, list view, fixed-size list, run-end encoded
        children = [arrow_type.value_type]
    elif hasattr(arrow_type, "num_fields"):  # struct, union
        children = [arrow_type.field(i).type for i in range(arrow_type.num_fields)]
    return [tz for child in children for tz in _time_zones(child, depth + 1)]


# -- pandas' metadata, from an untrusted writer ---------------------------------------------------------------
# pyarrow rebuilds the index, the column index and the dtypes of a frame from the JSON under b"pandas"; it parses
# the dtype strings in there with pandas (``datetime64[ns, dateutil/<path>]`` opens that path) and NumPy
# (``V99999999999`` is a dtype of 100 GB per item). So the host keeps only the fields pyarrow reads, with values
# from the allow-lists below; a dtype outside them becomes "object" (the Arrow type decides the column's dtype).
_UNITS = "(s|ms|us|ns)"
_SAFE_DTYPES = re.compile(
    r"(u?int(8|16|32|64)|float(16|32|64)|bool|object|str|bytes|category|"
    r"U?Int(8|16|32|64)|Float(32|64)|boolean|string|string\[(python|pyarrow)\]|"
    rf"(datetime|timedelta)64\[{_UNITS}\]|"
    r"period\[[A-Za-z0-9-]{1,12}\]|interval\[(u?int(8|16|32|64)|float(32|64)), (right|left|both|neither)\]|"
    r"(u?int(8|16|32|64)|float|double|halffloat|bool|string|large_string|binary|large_binary|date32\[day\]|"
    rf"timestamp\[{_UNITS}\]|duration\[{_UNITS}\])\[pyarrow\])"
)
_ZONED_DTYPE = re.compile(
    rf"datetime64\[{_UNITS}, (?P<tz>[^\]]{{1,64}})\]|timestamp\[{_UNITS}, tz=(?P<atz>[^\]]{{1,64}})\]\[pyarrow\]"
)
_INDEX_PANDAS_TYPES = {
    *(f"{k}{n}" for k in ("int", "uint") for n in (8, 16, 32, 64)),
    *("float16", "float32", "float64", "bool", "unicode", "string", "bytes", "integer", "floating"),
    *("datetime", "datetimetz", "date", "decimal", "empty", "object", "mixed", "mixed-integer", "mixed-integer-float"),
}
_MAX_ATTRS_BYTES = 64 << 10  # df.attrs: pandas copies them along with every derived frame


def _clean_schema_metadata(schema: Any) -> dict[bytes, bytes] | None:
    """The schema's metadata with pandas' entry rebuilt from its allowed fields; nothing else is kept."""
    raw = (schema.metadata or {}).get(b"pandas")
    if raw is None:
        return None
    try:
        meta = json.loads(raw)
    except ValueError:
        raise TransferError("the kernel's Arrow payload has malformed pandas metadata (not JSON)") from None
    if not isinstance(meta, dict):
        raise TransferError("the kernel's Arrow payload has malformed pandas metadata (not a mapping)")
    fields = set(schema.names)
    clean = {
        "index_columns": _clean_index_columns(meta.get("index_columns"), fields),
        "column_indexes": [_clean_column(c, fields, index=True) for c in _entries(meta, "column_indexes", 32)],
        "columns": [_clean_column(c, fields, index=False) for c in _entries(meta, "columns", len(fields) + 64)],
        "attributes": _clean_attributes(meta.get("attributes")),
    }
    return {b"pandas": json.dumps(clean).encode()}


def _entries(meta: dict[str, Any], key: str, limit: int) -> list[dict[str, Any]]:
    entries = meta.get(key) or []
    if not isinstance(entries, list) or len(entries) > limit or not all(isinstance(e, dict) for e in entries):
        raise TransferError(f"the kernel's Arrow payload has malformed pandas metadata ({key!r})")
    return entries


def _clean_index_columns(index_columns: Any, fields: set[str]) -> list[Any]:
    if not isinstance(index_columns, list) or len(index_columns) > 32:
        raise TransferError("the kernel's Arrow payload has malformed pandas metadata ('index_columns')")
    clean: list[Any] = []
    for entry in index_columns:
        if isinstance(entry, str) and entry in fields:
            clean.append(entry)
        elif isinstance(entry, dict) and entry.get("kind") == "range" and _range_ok(entry):
            clean.append({k: entry.get(k) for k in ("kind", "name", "start", "stop", "step")})
        else:
            raise TransferError(f"the kernel's Arrow payload names an index it does not hold: {str(entry)[:80]!r}")
    return clean


def _range_ok(entry: dict[str, Any]) -> bool:
    numbers = [entry.get(k) for k in ("start", "stop", "step")]
    return all(type(n) is int for n in numbers) and numbers[2] != 0 and _plain_name(entry.get("name"))


def _plain_name(name: Any) -> bool:
    return name is None or (type(name) in (str, int, float, bool) and len(str(name)) <= 4096)


def _clean_column(column: dict[str, Any], fields: set[str], index: bool) -> dict[str, Any]:
    name, field_name = column.get("name"), column.get("field_name", column.get("name"))
    if not _plain_name(name) or not (field_name is None or isinstance(field_name, str)):
        raise TransferError(f"the kernel's Arrow payload has a malformed column name: {str(name)[:80]!r}")
    pandas_type = column.get("pandas_type")
    numpy_type = _clean_dtype(column.get("numpy_type"))
    if index:  # the column index's levels are cast with NumPy to these: plain types only
        pandas_type = pandas_type if pandas_type in _INDEX_PANDAS_TYPES else "object"
        if "[" in numpy_type and not numpy_type.startswith("datetime64"):
            numpy_type = "object"
    elif not isinstance(pandas_type, str) or len(pandas_type) > 64:
        pandas_type = "object"
    clean = {"name": name, "field_name": field_name, "pandas_type": pandas_type, "numpy_type": numpy_type}
    clean["metadata"] = _clean_column_metadata(column.get("metadata"))
    return clean


def _clean_dtype(dtype: Any) -> str:
    if not isinstance(dtype, str) or len(dtype) > 96:
        return "object"
    if _SAFE_DTYPES.fullmatch(dtype):
        return dtype
    zoned = _ZONED_DTYPE.fullmatch(dtype)
    if zoned:
        tz = zoned.group("tz") or zoned.group("atz")
        if not _known_time_zone(tz):
            raise TransferError(f"the kernel's Arrow payload names an unknown time zone {tz[:80]!r}; refused")
        return dtype
    return "object"


def _clean_column_metadata(metadata: Any) -> dict[str, Any] | None:
    """Only the time zone is read back (by pyarrow, for tz-aware columns and column indexes)."""
    if not isinstance(metadata, dict) or "timezone" not in metadata:
        return None
    tz = metadata["timezone"]
    if tz is not None and not _known_time_zone(tz):
        raise TransferError(f"the kernel's Arrow payload names an unknown time zone {str(tz)[:80]!r}; refused")
    return {"timezone": tz}


def _clean_attributes(attributes: Any) -> dict[str, Any]:
    if not isinstance(attributes, dict) or not attributes:
        return {}
    if len(json.dumps(attributes)) > _MAX_ATTRS_BYTES:
        return {}  # a frame's attrs are a convenience: too big to carry along, dropped
    return attributes


_OFFSET_TZ = re.compile(r"[+-]([01]\d|2[0-3]):[0-5]\d")  # as Arrow spells them; "+99:99" sent pyarrow to import pytz


def _known_time_zone(tz: Any) -> bool:
    import zoneinfo

    if not isinstance(tz, str):
        return False
    return tz in ("UTC", "utc", "Z") or bool(_OFFSET_TZ.fullmatch(tz)) or tz in _iana_zones(zoneinfo)


def _iana_zones(zoneinfo: Any) -> frozenset[str]:
    global _ZONES
    if _ZONES is None:
        _ZONES = frozenset(zoneinfo.available_timezones())
    return _ZONES


_ZONES: frozenset[str] | None = None


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
