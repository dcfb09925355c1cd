"""BFCL (Berkeley Function Calling Leaderboard) on bfcl-eval's own data and checkers.

    results = asyncio.run(arun_bfcl(["simple", "multi_turn_base"], "code", llm, limit=5))

See ``data`` (categories, entries, gold calls), ``stubs`` (recording stubs, checker formats),
``score`` (bfcl-eval's checkers) and ``run`` (the agents on entries).
"""

from cave.benchmarks.bfcl.data import CATEGORIES, DEFAULT_CATEGORIES, Entry, gold_calls, load_category, require_bfcl
from cave.benchmarks.bfcl.run import EntryResult, arun_bfcl, arun_entry, gold_replies, replies_for, run_entry
from cave.benchmarks.bfcl.score import score

__all__ = [
    "CATEGORIES",
    "DEFAULT_CATEGORIES",
    "Entry",
    "EntryResult",
    "arun_bfcl",
    "arun_entry",
    "gold_calls",
    "gold_replies",
    "load_category",
    "replies_for",
    "require_bfcl",
    "run_entry",
    "score",
]
