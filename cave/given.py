"""The objects the host gave a session (injected tables, engines, functions): what the agent knows of them and
how it keeps them as given. ``Agent`` takes these methods from ``Given``; they use its ``runtime`` and
``describe()``.

The given variables are protected (``guard_code`` keeps the model from replacing or reloading them), looked up by
the answer checks (the tables, for names where an answer has ids; the functions, for tasks done by calling them),
put back as given when code changed them and the model reads them again, and a variable the model made is read
back by name to compare it with what an answer typed.
"""

from __future__ import annotations

import asyncio
import zlib
from typing import Any

from cave.review.column_names import RENAMES, created_columns, read_first, separator_names, spaced_names
from cave.runtimes.describe import preview, type_name

__all__ = ["Given"]


class Given:
    """The given-objects half of ``Agent`` (see the module docstring)."""

    runtime: Any
    describe: Any
    _renamed_columns: bool
    _created_columns: set[str]

    async def _restore_given(self, names: list[str]) -> list[str]:
        """Put back, as they were given, the variables in ``names`` that earlier cells changed (their shape, columns
        or dtypes differ from the host's copy); one note for each. A cell that reads a given table from its file
        again wants the data as it was given, and its line is skipped (guard_code)."""
        if not names:
            return []
        live = {v.name: v.preview for v in await self.describe()}
        notes = []
        for name in names:
            reg = self.runtime.registered.get(name)
            if reg is None or reg.kind != "variable":
                continue
            given = preview(reg.value)
            if live.get(name) == given:
                # same shape, columns and dtypes: values changed in place (a log applied, a column filled) show only
                # in the data, and a cell that reads the file again means the data as given (a development task: a log
                # re-run on the logged column sent NaN)
                if await self._same_data(name, reg.value):
                    continue
                was = "its values changed in place"
            else:
                was = (live.get(name) or "deleted")[:80]
            await asyncio.to_thread(self.runtime.inject, name, reg.value, reg.description)
            notes.append(
                f"`{name}` had been changed by earlier code ({was}); it is back as it was given ({given[:80]})."
            )
        return notes

    async def _kept_changes(self, code: str, names: list[str]) -> list[str]:
        """Of the given tables ``code`` reads again from their files, those it also reads a column of that only the
        earlier code made (not in the given table, not written by this cell before it reads it, but in the live one): the cell relies on
        that earlier work, and putting the table back would drop it (a development task: ``df['high_damage']`` made in one
        cell, and the next, with its habitual ``df = pd.read_csv(...)``, failed on it three times)."""
        kept = []
        for name in names:
            reg = self.runtime.registered.get(name)
            columns = getattr(reg.value, "columns", None) if reg is not None else None
            if columns is None:
                continue
            wanted = read_first(code, name) - {c for c in columns if isinstance(c, str)}
            if not wanted:
                continue
            try:
                live = await asyncio.to_thread(self.runtime.retrieve, name)
            except Exception:
                continue
            if wanted & {c for c in getattr(live, "columns", []) if isinstance(c, str)}:
                kept.append(name)
        return kept

    async def _same_data(self, name: str, given: Any) -> bool:
        """Whether the live ``name`` holds the given table's data (tables and arrays are compared by value; other
        objects, and a live value that cannot be read back, count as the same)."""
        import numpy as np
        import pandas as pd

        if not isinstance(given, pd.DataFrame | pd.Series | np.ndarray):
            return True
        try:
            live = await asyncio.to_thread(self.runtime.retrieve, name)
        except Exception:  # an untrusted kernel's object that cannot come back: the preview check stands
            return True
        if isinstance(given, np.ndarray):
            return isinstance(live, np.ndarray) and np.array_equal(live, given, equal_nan=live.dtype.kind == "f")
        return type(live) is type(given) and live.equals(given)

    def _spaced_names(self, code: str, guarded: str, restored: bool) -> tuple[str, list[str]]:
        """``column_names.spaced_names`` and ``separator_names`` on ``guarded`` with the given tables' columns, unless the code renamed them (then a
        name without its end spaces may be the real one, until the tables are restored as given)."""
        if restored:  # the given tables are back as given: with their own column names
            self._renamed_columns = False
        if RENAMES.search(code):
            self._renamed_columns = True
            return guarded, []
        if self._renamed_columns:
            return guarded, []
        columns = {n: list(f.columns) for n, f in self._given_tables().items()}
        guarded, notes = spaced_names(guarded, columns)
        guarded, more = separator_names(guarded, columns, self._created_columns)
        self._created_columns |= created_columns(code)  # a column the code made is its own, not a misspelling
        return guarded, notes + more

    def _protected(self) -> dict[str, str]:
        """The given variables (name -> type name): guard_code keeps the model from replacing or reloading them."""
        return {name: type_name(reg.value) for name, reg in self.runtime.registered.items() if reg.kind == "variable"}

    def _given_tables(self) -> dict[str, Any]:
        """The given DataFrames by name (the host's copies): where the form check looks up names for ids."""
        return {
            name: reg.value
            for name, reg in self.runtime.registered.items()
            if reg.kind == "variable" and type_name(reg.value) == "pandas.DataFrame"
        }

    def _review_tables(self) -> dict[str, Any]:
        """The tables the task's contract reads an answer against: the given DataFrames, and the small tables of
        the given databases by their table names (a name a given variable has stays the variable's). The review's
        holds read only the given DataFrames: on a database's tables, read by the model its own way, an entity-count
        hold fired on a right count and the run changed it (a development run)."""
        found = dict(self._database_tables())
        found.update(self._given_tables())
        return found

    def _form_tables(self) -> tuple[dict[str, Any], dict[str, str]]:
        """The tables the form check looks names up in (``answers.form_problems``): the review's tables, and for each
        one of a given database the variable that holds it. Ids sent where the task asks for the things are the same
        mistake whether the names sit in a DataFrame or a database's table (a development run: "Who were our top 3
        customers" answered from SQL with customer_id)."""
        given = self._given_tables()
        sources: dict[str, str] = {}
        for db in self.runtime.registered:
            for table in self._database_tables(db):
                if table not in given:
                    sources.setdefault(table, db)  # the first database's table, as _database_tables merges them
        return self._review_tables(), sources

    def _database_tables(self, name: str | None = None) -> dict[str, Any]:
        """The small tables of the given SQLite databases (of the one given as ``name``), read once on the host
        (``database_tables``)."""
        cached: dict[str, dict[str, Any]] = self.__dict__.setdefault("_db_tables", {})
        for given, reg in self.runtime.registered.items():
            if given not in cached and reg.kind == "variable" and not reg.host:
                cached[given] = database_tables(reg.value)
        if name is not None:
            return cached.get(name, {})
        merged: dict[str, Any] = {}
        for tables in cached.values():
            merged.update({t: f for t, f in tables.items() if t not in merged})
        return merged

    async def _live_values(self, names: list[str]) -> dict[str, Any]:
        """The session's variables of these names that the code made (not the given objects); absent ones left out."""
        out = {}
        for name in names:
            if name.isidentifier() and name not in self.runtime.registered:
                try:
                    out[name] = await asyncio.to_thread(self.runtime.retrieve, name)
                except Exception:  # absent, or not retrievable (unpicklable): nothing to compare with
                    pass
        return out

    def _given_functions(self) -> list[str]:
        """The functions the session was given (tools, skills): the model calls them, never redefines them."""
        return [name for name, reg in self.runtime.registered.items() if reg.kind == "function"]


# -- a given database's tables ------------------------------------------------------------------------------------
DB_ROWS = 50_000  # a table with more rows is left out of the profile and the review (reading it costs too much)
DB_TABLES = 20  # tables read from one database, at most


def database_tables(engine: Any, max_rows: int = DB_ROWS) -> dict[str, Any]:
    """The tables of a SQLite database given as a SQLAlchemy engine, as DataFrames by table name: those of at most
    ``max_rows`` rows, the first ``DB_TABLES`` tables. Anything else (another object, another database, a table
    that cannot be read) gives nothing: the profile and the review are courtesies, never a failure.

    A "which city" question over a database answered with a count went unquestioned: the review knew only given
    DataFrames (a development task).

    >>> import sqlalchemy
    >>> engine = sqlalchemy.create_engine("sqlite://")
    >>> with engine.begin() as con:
    ...     _ = con.exec_driver_sql("CREATE TABLE shops (city TEXT, sales INTEGER)")
    ...     _ = con.exec_driver_sql("INSERT INTO shops VALUES ('Oslo', 3), ('Lima', 4)")
    >>> database_tables(engine)["shops"].city.tolist(), database_tables(object())
    (['Oslo', 'Lima'], {})
    """
    import sys

    sa = sys.modules.get("sqlalchemy")
    if sa is None or not isinstance(engine, sa.engine.Engine) or engine.dialect.name != "sqlite":
        return {}
    import pandas as pd

    out = {}
    try:
        names = sa.inspect(engine).get_table_names()[:DB_TABLES]
        with engine.connect() as con:
            for table in names:
                quoted = engine.dialect.identifier_preparer.quote(table)
                rows = con.exec_driver_sql(f"SELECT COUNT(*) FROM {quoted}").scalar()
                if rows is not None and rows <= max_rows:
                    out[table] = pd.read_sql(sa.text(f"SELECT * FROM {quoted}"), con)
    except Exception:  # a locked or broken database: what was read so far
        pass
    return out


# -- what the team machinery and independent attempts share ----------------------------------------------
def derive_seed(base: int | None, *parts: object) -> int | None:
    """A stable per-role seed (not Python's salted hash), or None when there is no base seed.

    >>> derive_seed(0, "solver") == derive_seed(0, "solver") != derive_seed(0, "verifier")
    True
    """
    if base is None:
        return None
    return zlib.crc32(":".join(map(str, (base, *parts))).encode()) & 0x7FFFFFFF


def private_copy(value: Any) -> Any:
    """A copy of a data input that a role may mutate freely; other objects (engines, models) are shared.

    >>> data = {"a": [1, 2]}
    >>> c = private_copy(data); c["a"].append(3); data
    {'a': [1, 2]}
    """
    import copy

    module = type(value).__module__.split(".")[0]
    if module in ("pandas", "numpy") and hasattr(value, "copy"):
        return value.copy()
    if isinstance(value, (list, dict, set, tuple)):
        try:
            return copy.deepcopy(value)
        except Exception:  # something inside cannot be copied: share it, as with any other object
            return value
    return value


def in_process(rt: Any) -> bool:
    """Whether ``rt`` holds the given objects themselves (zero-copy): code that changes one in place changes the
    host's object, so a second user of it needs a private copy (a kernel holds its own)."""
    return getattr(rt, "name", "") == "inprocess"
