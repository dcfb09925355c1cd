"""The labelled task-contract corpus (phrasings.yaml) is well formed: it loads, it is big enough, every label is a
legal field with a legal value, and the entries taken from the development questions are verbatim.

This validates the corpus only; the contract reader is tested against it elsewhere.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
import yaml

CORPUS = Path(__file__).parent / "phrasings.yaml"
DABENCH_FIXTURE = Path(__file__).parent.parent / "benchmarks" / "dabench_fixture"

SOURCES = {"new", "analyst", "dabench"}
KINDS = {"number", "count", "name", "list", "set", "date", "table", "bool", "frame"}
ORDERS = {"asc", "desc"}
FIELDS = {"outputs", "columns", "per", "order", "top", "which", "count_of", "kind", "decimals", "distinct"}
PHRASE_FIELDS = ("per", "which", "count_of")  # lowercased noun phrases, as written
ARTICLES = ("the ", "a ", "an ")


def _entries() -> list[dict[str, Any]]:
    return yaml.safe_load(CORPUS.read_text(encoding="utf-8"))


ENTRIES = _entries()


def _is_int(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def _names(v: Any) -> bool:
    return isinstance(v, list) and bool(v) and all(isinstance(x, str) and x.strip() == x and x for x in v)


def test_corpus_loads_and_is_big_enough():
    assert isinstance(ENTRIES, list)
    assert len(ENTRIES) >= 160
    sources = [e["source"] for e in ENTRIES]
    assert sources.count("new") >= 120
    # questions with no contract field beyond the kind of answer
    assert sum(1 for e in ENTRIES if set(e["expect"]) <= {"kind"}) >= 15


def test_texts_are_unique():
    texts = [e["text"] for e in ENTRIES]
    dups = {t for t in texts if texts.count(t) > 1}
    assert not dups


@pytest.mark.parametrize("entry", ENTRIES, ids=lambda e: e["text"][:60])
def test_entry_is_legal(entry: dict[str, Any]):
    assert set(entry) == {"source", "text", "expect"}
    assert entry["source"] in SOURCES
    assert isinstance(entry["text"], str) and entry["text"].strip()
    expect = entry["expect"]
    assert isinstance(expect, dict)
    assert set(expect) <= FIELDS, set(expect) - FIELDS
    if "outputs" in expect:
        assert _names(expect["outputs"]) and all(x.isidentifier() for x in expect["outputs"])
        assert len(set(expect["outputs"])) == len(expect["outputs"])
    if "columns" in expect:
        assert _names(expect["columns"])
        assert len(set(expect["columns"])) == len(expect["columns"])
    for field in PHRASE_FIELDS:
        if field in expect:
            v = expect[field]
            assert isinstance(v, str) and v and v == v.strip() and v == v.lower(), (field, v)
            assert not v.startswith(ARTICLES), (field, v)
    if "count_of" in expect:
        assert not {"distinct", "unique", "different"} & set(expect["count_of"].split())
    if "order" in expect:
        assert expect["order"] in ORDERS
    if "top" in expect:
        assert _is_int(expect["top"]) and expect["top"] >= 1
        # a top N is a ranking: its direction is labelled with it, unless it depends on the column ("the 3 oldest"
        # are the highest ages and the earliest dates)
        assert "order" in expect or re.search(r"\b(?:oldest|newest|youngest)\b", entry["text"])
    if "kind" in expect:
        assert expect["kind"] in KINDS
    if "decimals" in expect:
        assert _is_int(expect["decimals"]) and 0 <= expect["decimals"] <= 10
    if "distinct" in expect:
        assert expect["distinct"] is True  # only the positive is labelled; absent means not asked


def test_analyst_entries_are_verbatim():
    from cave.benchmarks.analyst.tasks import TASKS

    questions = {t.question for t in TASKS.values()}
    texts = [e["text"] for e in ENTRIES if e["source"] == "analyst"]
    assert texts and not set(texts) - questions


def test_dabench_entries_are_verbatim():
    from cave.benchmarks.dabench.data import load_questions
    from cave.benchmarks.dabench.run import prompt

    questions = load_questions(DABENCH_FIXTURE)
    known = {q.question for q in questions} | {prompt(q, "code") for q in questions}
    texts = [e["text"] for e in ENTRIES if e["source"] == "dabench"]
    assert not set(texts) - known, json.dumps(sorted(set(texts) - known), indent=1)
