"""Reading an Arrow IPC payload: zero-copy from a trusted writer, as hostile input from an untrusted kernel.

``read_arrow(path, validate=True)`` is how the host reads a DataFrame (or a one-column array or index) that a
sandboxed kernel wrote: the bytes are copied first, compression is refused, time zones and pandas' metadata pass an
allow-list, and Arrow's full validation runs before pandas touches the data. ``cave.runtimes.transfer`` decides when a
payload is Arrow; this module only reads one.
"""

from __future__ import annotations

import json
import re
import struct
from typing import Any

from cave.runtimes.base import TransferError

__all__ = ["read_arrow"]


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
