"""sql: schema inspection and read-only querying through a SQLAlchemy engine.

Every statement runs on a connection the *database* keeps read-only -- not a keyword filter:

- SQLite: ``PRAGMA query_only = ON`` plus an authorizer callback (``sqlite3.Connection.set_authorizer``)
  that denies every action except reading, selecting, calling functions and introspection pragmas
  (so ATTACH, temp tables and ``PRAGMA query_only = OFF`` are refused too). Both are removed and the
  previous ``query_only`` value restored before the connection goes back to the pool, so the host
  can still write through the same engine.
- PostgreSQL: ``SET TRANSACTION READ ONLY`` as the first statement of the transaction.
- MySQL/MariaDB: ``SET TRANSACTION READ ONLY`` before the transaction starts.

Every transaction is rolled back at the end. Other dialects are refused (no verified read-only mode).
"""

from __future__ import annotations

import sqlite3
import sys
from collections.abc import Iterator, Mapping
from contextlib import contextmanager

import pandas as pd
import sqlalchemy as sa
from sqlalchemy.engine import Connection, Engine

__all__ = [
    "LIMITS",
    "WriteRefused",
    "describe_table",
    "explain",
    "list_tables",
    "query",
    "read_only",
    "sample",
    "schema",
]

# Defaults read at call time: change LIMITS["max_rows"] to change every query's row cap.
LIMITS: dict[str, int] = {"max_rows": 10_000, "sample_rows": 5}


class WriteRefused(PermissionError):
    """A statement tried to change the database; the sql skill only reads."""


_ALLOWED_ACTIONS = {
    sqlite3.SQLITE_READ,
    sqlite3.SQLITE_SELECT,
    sqlite3.SQLITE_FUNCTION,
    getattr(sqlite3, "SQLITE_RECURSIVE", 33),
}
# Pragmas that only describe the schema (whatever their argument, they never write).
_READ_PRAGMAS = {
    "table_info",
    "table_xinfo",
    "table_list",
    "index_list",
    "index_info",
    "index_xinfo",
    "foreign_key_list",
    "database_list",
    "collation_list",
    "function_list",
    "module_list",
    "pragma_list",
    "compile_options",
}
_DENIED_FUNCTIONS = {"load_extension"}
# Authorizer action codes by name, for the refusal message (sqlite3 reuses these numbers for other constants).
_ACTION_NAMES = {
    getattr(sqlite3, "SQLITE_" + n): n.lower()
    for n in (
        "CREATE_INDEX CREATE_TABLE CREATE_TEMP_INDEX CREATE_TEMP_TABLE CREATE_TEMP_TRIGGER CREATE_TEMP_VIEW "
        "CREATE_TRIGGER CREATE_VIEW DELETE DROP_INDEX DROP_TABLE DROP_TEMP_INDEX DROP_TEMP_TABLE "
        "DROP_TEMP_TRIGGER DROP_TEMP_VIEW DROP_TRIGGER DROP_VIEW INSERT PRAGMA TRANSACTION UPDATE ATTACH DETACH "
        "ALTER_TABLE REINDEX ANALYZE CREATE_VTABLE DROP_VTABLE SAVEPOINT"
    ).split()
    if hasattr(sqlite3, "SQLITE_" + n)
}


def _engine(engine: Engine | Connection | str) -> Engine:
    if isinstance(engine, str):
        return sa.create_engine(engine)
    if isinstance(engine, Connection):
        return engine.engine
    if not isinstance(engine, Engine):
        raise TypeError(f"expected a SQLAlchemy Engine or a database URL; got {type(engine).__name__}")
    return engine


@contextmanager
def read_only(engine: Engine | str) -> Iterator[Connection]:
    """A connection the database itself keeps read-only; always rolled back.

    >>> with read_only(engine) as conn:                  # doctest: +SKIP
    ...     conn.exec_driver_sql("SELECT count(*) FROM orders").scalar()
    """
    eng = _engine(engine)
    dialect = eng.dialect.name
    with eng.connect() as conn:
        if dialect == "sqlite":
            with _sqlite_read_only(conn):
                yield conn
        elif dialect in ("postgresql", "mysql", "mariadb"):
            conn.exec_driver_sql("SET TRANSACTION READ ONLY")
            try:
                yield conn
            finally:
                conn.rollback()
        else:
            raise WriteRefused(
                f"the sql skill has no verified read-only mode for {dialect!r} databases (it supports sqlite, "
                "postgresql, mysql); connect with a read-only database user and query with SQLAlchemy directly"
            )


@contextmanager
def _sqlite_read_only(conn: Connection) -> Iterator[None]:
    raw = conn.connection.dbapi_connection
    denied: list[str] = []

    def authorizer(action: int, arg1: str | None, arg2: str | None, db: str | None, trigger: str | None) -> int:
        if action == sqlite3.SQLITE_PRAGMA and (arg1 or "").lower() in _READ_PRAGMAS:
            return sqlite3.SQLITE_OK
        if action == sqlite3.SQLITE_FUNCTION and (arg2 or "").lower() in _DENIED_FUNCTIONS:
            denied.append(f"function {arg2}")
            return sqlite3.SQLITE_DENY
        if action in _ALLOWED_ACTIONS:
            return sqlite3.SQLITE_OK
        what = _ACTION_NAMES.get(action, str(action))
        denied.append(" ".join(str(a) for a in (what, arg1, arg2) if a))
        return sqlite3.SQLITE_DENY

    previous = raw.execute("PRAGMA query_only").fetchone()[0]
    raw.execute("PRAGMA query_only = ON")
    raw.set_authorizer(authorizer)
    conn.info["cave_sql_denied"] = denied
    try:
        yield
    finally:
        raw.set_authorizer(None)
        raw.execute(f"PRAGMA query_only = {int(previous)}")
        conn.info.pop("cave_sql_denied", None)
        conn.rollback()


def _run(conn: Connection, sql: str, params: dict | list | tuple | None):
    """Execute one statement; turn the database's refusal of a write into WriteRefused."""
    try:
        if params is None:
            return conn.exec_driver_sql(sql)
        if isinstance(params, Mapping):
            return conn.execute(sa.text(sql), dict(params))
        return conn.exec_driver_sql(sql, tuple(params))
    except sa.exc.DBAPIError as e:
        denied = conn.info.get("cave_sql_denied") or []
        msg = str(e.orig).lower()
        if denied or "readonly" in msg or "read-only" in msg or "read only" in msg or "query_only" in msg:
            what = f" (denied: {', '.join(denied)})" if denied else f" ({e.orig})"
            short = " ".join(sql.split())[:200]
            raise WriteRefused(
                f"refused: the sql skill only reads, and this statement would change the database{what}: {short!r}. "
                "Compute results in SQL SELECTs or in pandas instead."
            ) from None
        raise


def query(
    engine: Engine | str,
    sql: str,
    params: dict | list | tuple | None = None,
    max_rows: int | None = None,
) -> pd.DataFrame:
    """Run one read-only SQL statement; returns a DataFrame of at most ``max_rows`` rows.

    Bind values instead of formatting them into the SQL: ``query(engine, "SELECT * FROM t WHERE id = :id",
    {"id": 3})``. Writes raise WriteRefused; more rows than the cap are cut with a warning
    (``df.attrs["truncated"]`` is True, a note goes to stderr): aggregate in SQL instead of fetching everything.
    """
    limit = LIMITS["max_rows"] if max_rows is None else int(max_rows)
    with read_only(engine) as conn:
        result = _run(conn, sql, params)
        if not result.returns_rows:
            return pd.DataFrame()
        columns = list(result.keys())
        rows = result.fetchmany(limit + 1)
    df = pd.DataFrame([tuple(r) for r in rows[:limit]], columns=columns)
    df.attrs["truncated"] = len(rows) > limit
    if len(rows) > limit:
        # printed, not warnings.warn: a warning shows once per call site, this must show on every query
        print(
            f"note: the query returned more than {limit} rows; kept the first {limit}. Aggregate or filter in SQL, "
            "or pass max_rows=",
            file=sys.stderr,
        )
    return df


def list_tables(engine: Engine | str, include_views: bool = True) -> list[str]:
    """Names of the tables (and views) of the database's default schema."""
    with read_only(engine) as conn:
        insp = sa.inspect(conn)
        names = insp.get_table_names()
        if include_views:
            names += insp.get_view_names()
    return sorted(names)


def _check_table(engine: Engine | str, table: str) -> None:
    tables = list_tables(engine)
    if table not in tables:
        raise KeyError(f"no table or view named {table!r}; the database has: {', '.join(tables) or '(none)'}")


def describe_table(engine: Engine | str, table: str) -> pd.DataFrame:
    """One row per column of ``table``: name, type, nullable, default, primary_key, references."""
    _check_table(engine, table)
    with read_only(engine) as conn:
        insp = sa.inspect(conn)
        columns = insp.get_columns(table)
        pk = set(insp.get_pk_constraint(table).get("constrained_columns") or [])
        refs = {}
        for fk in insp.get_foreign_keys(table):
            for col, ref in zip(fk["constrained_columns"], fk["referred_columns"], strict=False):
                refs[col] = f"{fk['referred_table']}.{ref}"
    return pd.DataFrame(
        [
            {
                "column": c["name"],
                "type": str(c["type"]),
                "nullable": bool(c.get("nullable", True)),
                "default": c.get("default"),
                "primary_key": c["name"] in pk,
                "references": refs.get(c["name"]),
            }
            for c in columns
        ]
    )


def sample(engine: Engine | str, table: str, n: int | None = None) -> pd.DataFrame:
    """The first ``n`` rows of a table (LIMITS["sample_rows"] by default)."""
    _check_table(engine, table)
    eng = _engine(engine)
    quoted = eng.dialect.identifier_preparer.quote(table)
    return query(eng, f"SELECT * FROM {quoted} LIMIT {int(n or LIMITS['sample_rows'])}")


def schema(engine: Engine | str, row_counts: bool = True) -> str:
    """A compact text description of every table: columns with types, keys, references and row counts."""
    eng = _engine(engine)
    lines = [f"database: {eng.dialect.name} {eng.url.render_as_string(hide_password=True)}"]
    for table in list_tables(eng):
        desc = describe_table(eng, table)
        count = ""
        if row_counts:
            quoted = eng.dialect.identifier_preparer.quote(table)
            count = f" ({int(query(eng, f'SELECT COUNT(*) AS n FROM {quoted}')['n'].iloc[0])} rows)"
        lines.append(f"{table}{count}")
        for row in desc.itertuples():
            notes = [row.type]
            if row.primary_key:
                notes.append("primary key")
            if not row.nullable:
                notes.append("not null")
            if isinstance(row.references, str):
                notes.append(f"-> {row.references}")
            lines.append(f"  {row.column}: {', '.join(notes)}")
    return "\n".join(lines)


def explain(engine: Engine | str, sql: str, params: dict | list | tuple | None = None) -> pd.DataFrame:
    """The database's query plan for a SELECT (EXPLAIN QUERY PLAN on SQLite, EXPLAIN elsewhere)."""
    prefix = "EXPLAIN QUERY PLAN " if _engine(engine).dialect.name == "sqlite" else "EXPLAIN "
    return query(engine, prefix + sql, params)
