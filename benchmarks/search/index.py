"""The search tool: a BM25 index (SQLite FTS5) over the generated encyclopedia, and ``search(query, k) -> [Hit]``.

Why FTS5: it is in the standard library's sqlite3 (no dependency in a core install, unlike rank_bm25, which is only
in the bench extra), it ranks with BM25 (``bm25()``, k1=1.2, b=0.75) over Porter-stemmed words (founded ~ founder), it answers from an inverted index rather than
scoring every passage in Python, and the index is one file that any process can open: a kernel or sandbox runtime
imports this module and opens the same file, so ``search`` returns live ``Hit`` objects there too.

The index is built at first use from the seeded generator and cached as
``$CAVE_HOME/search/encyclopedia-<seed>-v<VERSION>.db`` (about 1 s, ~1 MB); nothing is downloaded.

>>> hits = search("Who founded the company?", k=3)
>>> len(hits), type(hits[0]).__name__, hits[0].score > 0
(3, 'Hit', True)
"""

from __future__ import annotations

import os
import re
import sqlite3
import tempfile
import threading
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from cave.benchmarks.search.corpus import DEFAULT_SEED, make_corpus

VERSION = 2  # bump when the generator or the tokenizer changes: a new cache file
_LOCK = threading.Lock()
_OPEN: dict[int, SearchIndex] = {}


@dataclass(frozen=True)
class Hit:
    """One passage found: its title (the entity it is about), its text and its BM25 score (higher is better)."""

    title: str
    text: str
    score: float

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def fts_query(text: str) -> str:
    """A free-text query as an FTS5 expression: its words OR-ed together, quoted (no FTS syntax gets through).

    >>> fts_query('Who founded "Kalo Works"?')
    '"who" OR "founded" OR "kalo" OR "works"'
    >>> fts_query("?!")
    ''
    """
    words = re.findall(r"\w+", text.lower())
    return " OR ".join(f'"{w}"' for w in dict.fromkeys(words))


def cache_dir() -> Path:
    """``$CAVE_HOME/search`` (default ``~/.cache/cave/search``); a temporary folder where that is not writable."""
    home = Path(os.environ.get("CAVE_HOME") or Path.home() / ".cache" / "cave").expanduser() / "search"
    try:
        home.mkdir(parents=True, exist_ok=True)
        return home
    except OSError:
        return Path(tempfile.gettempdir()) / "cave-search"


def build_index(path: Path, seed: int = DEFAULT_SEED) -> Path:
    """Write the FTS5 index of the encyclopedia of ``seed`` to ``path`` (atomically: a half-built file never shows)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(f".{os.getpid()}.tmp")
    con = sqlite3.connect(tmp)
    try:
        con.execute("CREATE VIRTUAL TABLE passages USING fts5(title, text, tokenize='porter unicode61')")
        con.executemany(
            "INSERT INTO passages(rowid, title, text) VALUES (?, ?, ?)",
            [(p.id, p.title, p.text) for p in make_corpus(seed).passages],
        )
        con.commit()
    finally:
        con.close()
    os.replace(tmp, path)
    return path


class SearchIndex:
    """An open index: ``search(query, k)``. Safe to share between threads (one connection per thread)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._local = threading.local()

    def _con(self) -> sqlite3.Connection:
        con = getattr(self._local, "con", None)
        if con is None:
            con = self._local.con = sqlite3.connect(f"file:{self.path}?mode=ro", uri=True, check_same_thread=False)
        return con

    def search(self, query: str, k: int = 5) -> list[Hit]:
        expr = fts_query(str(query))
        if not expr:
            return []
        rows = self._con().execute(
            "SELECT title, text, -bm25(passages) FROM passages WHERE passages MATCH ? ORDER BY bm25(passages) LIMIT ?",
            (expr, max(1, min(int(k), 50))),
        )
        return [Hit(t, x, round(s, 3)) for t, x, s in rows]


def open_index(seed: int = DEFAULT_SEED) -> SearchIndex:
    """The index of ``seed``, built on first use and cached on disk (one per process after that)."""
    with _LOCK:
        if seed not in _OPEN:
            path = cache_dir() / f"encyclopedia-{seed}-v{VERSION}.db"
            if not path.exists():
                build_index(path, seed)
            _OPEN[seed] = SearchIndex(path)
        return _OPEN[seed]


def search(query: str, k: int = 5) -> list[Hit]:
    """Search the encyclopedia: the k passages that best match ``query`` (BM25), best first, as Hit(title, text,
    score). Use short queries with the names you are looking for, e.g. search("Kalo Works founder")."""
    return open_index().search(query, k)


def search_json(query: str, k: int = 5) -> list[dict[str, Any]]:
    """``search`` with plain dicts, for the JSON function-calling baseline."""
    return [h.to_dict() for h in search(query, k)]
