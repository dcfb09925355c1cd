"""Reading a DABench data folder: questions, labels and the CSV tables.

    DIR/da-dev-questions.jsonl   {"id", "question", "concepts", "constraints", "format", "file_name", "level"}
    DIR/da-dev-labels.jsonl      {"id", "common_answers": [[name, value], ...]}
    DIR/da-dev-tables/FILE.csv   the table of each question

>>> answer_names('@mean_fare[mean_fare_value] where "mean_fare_value" is a float.')
['mean_fare']
"""

from __future__ import annotations

import json
import random
import re
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any

import pandas as pd

QUESTIONS = "da-dev-questions.jsonl"
LABELS = "da-dev-labels.jsonl"
TABLES = "da-dev-tables"
LEVELS = ("easy", "medium", "hard")
FORMAT = re.compile(r"@(\w+)\[(.*?)\]")  # the official answer format (eval_closed_form.extract_format)


class DataLayoutError(SystemExit):
    """DIR is not a DABench data folder: the message names what was expected."""


@dataclass(frozen=True)
class Question:
    id: int
    question: str
    constraints: str
    format: str
    file_name: str
    level: str
    concepts: tuple[str, ...]
    labels: tuple[tuple[str, str], ...]  # (name, value) as in common_answers

    @property
    def names(self) -> list[str]:
        """The answer names the format asks for (a superset of the labelled ones on some questions)."""
        return answer_names(self.format) or [n for n, _ in self.labels]


def answer_names(fmt: str) -> list[str]:
    return list(dict.fromkeys(name for name, _ in FORMAT.findall(fmt)))


def resolve(data: str | Path) -> Path:
    """The data folder: DIR itself, or DIR/examples/DA-Agent/data in a clone of the repository."""
    root = Path(data).expanduser()
    for cand in (root, root / "examples" / "DA-Agent" / "data"):
        if (cand / QUESTIONS).is_file() and (cand / LABELS).is_file() and (cand / TABLES).is_dir():
            return cand
    missing = [p for p in (QUESTIONS, LABELS, TABLES + "/") if not (root / p.rstrip("/")).exists()]
    raise DataLayoutError(
        f"--data {data}: not a DABench data folder (missing {', '.join(missing)}). Expected {QUESTIONS}, "
        f"{LABELS} and the CSV folder {TABLES}/ in it: a copy of examples/DA-Agent/data from "
        "https://github.com/InfiAgent/InfiAgent (CC BY-NC 4.0)"
    )


def _jsonl(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


def load_questions(
    data: str | Path,
    *,
    levels: list[str] | None = None,
    limit: int | None = None,
    seed: int = 0,
    ids: list[int] | None = None,
) -> list[Question]:
    """The labelled questions of DIR (of ``levels``; only ``ids`` when given), a seeded sample of ``limit`` of
    them, in id order. An id with no labelled question is an error that names it."""
    root = resolve(data)
    labels = {row["id"]: row["common_answers"] for row in _jsonl(root / LABELS)}
    out = [
        Question(
            id=q["id"],
            question=q["question"],
            constraints=q.get("constraints", ""),
            format=q.get("format", ""),
            file_name=q["file_name"],
            level=q.get("level", ""),
            concepts=tuple(q.get("concepts", ())),
            labels=tuple((str(n), str(v)) for n, v in labels[q["id"]]),
        )
        for q in _jsonl(root / QUESTIONS)
        if q["id"] in labels and (not levels or q.get("level") in levels) and (ids is None or q["id"] in ids)
    ]
    unknown = sorted(set(ids or ()) - {q.id for q in out})
    if unknown:
        raise SystemExit(f"--ids: no labelled question {', '.join(map(str, unknown))} in {root} (of these levels)")
    if limit is not None and limit < len(out):
        out = sorted(random.Random(seed).sample(out, limit), key=lambda q: q.id)
    return out


def table(data: str | Path, file_name: str) -> pd.DataFrame:
    """The CSV of a question (read once per run)."""
    return _table(str(resolve(data) / TABLES / file_name)).copy()


@lru_cache(maxsize=4)
def _table(path: str) -> pd.DataFrame:
    try:
        return pd.read_csv(path)
    except UnicodeDecodeError:
        return pd.read_csv(path, encoding="latin-1")
