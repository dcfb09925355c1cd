"""Reading a DataBench data folder: the QA table and each dataset's table.

DIR/qa.parquet (or any .parquet / .csv / .jsonl at the top of DIR with the QA columns)
    question, answer, type, dataset  [, sample_answer]
DIR/DATASET/all.parquet   (or DIR/data/DATASET/all.parquet)   the table a question is about
DIR/DATASET/sample.parquet                                    its first rows (DataBench lite, --lite)
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

import pandas as pd
from cave.benchmarks.databench.score import SEMANTICS

QA_COLUMNS = ("question", "answer", "type", "dataset")
QA_SUFFIXES = (".parquet", ".csv", ".jsonl")


class DataLayoutError(SystemExit):
    """DIR is not a DataBench data folder: the message names what was expected."""


@dataclass(frozen=True)
class Question:
    index: int  # the row of the QA table: the question's id
    question: str
    answer: str
    type: str  # one of score.SEMANTICS
    dataset: str
    sample_answer: str | None = None


def _read(path: Path) -> pd.DataFrame:
    if path.suffix == ".parquet":
        return pd.read_parquet(path)
    if path.suffix == ".jsonl":
        return pd.read_json(path, lines=True)
    return pd.read_csv(path)


def qa_file(data: str | Path) -> Path:
    """The QA table of DIR: ``qa.*`` first, else the only top-level table file with the QA columns."""
    root = Path(data).expanduser()
    if not root.is_dir():
        raise DataLayoutError(f"--data {data}: not a folder; give the folder that holds the QA table and the tables")
    files = sorted(p for p in root.iterdir() if p.suffix in QA_SUFFIXES and p.is_file())
    files.sort(key=lambda p: p.stem != "qa")
    for path in files:
        try:
            head = _read(path).columns
        except Exception:  # noqa: BLE001 - a file that is not a table is not the QA table
            continue
        if all(c in head for c in QA_COLUMNS):
            return path
    raise DataLayoutError(
        f"--data {data}: no QA table in it (a .parquet, .csv or .jsonl file at its top with the columns "
        f"{', '.join(QA_COLUMNS)}). Expected the QA table and each dataset's DATASET/all.parquet beside it, "
        "as in a copy of the DataBench data (SemEval-2025 Task 8)"
    )


def load_questions(
    data: str | Path, *, limit: int | None = None, seed: int = 0, types: list[str] | None = None
) -> list[Question]:
    """The questions of DIR's QA table (of ``types`` when given), a seeded sample of ``limit`` of them, in order."""
    qa = _read(qa_file(data))
    unknown = sorted(set(qa["type"].astype(str).str.strip()) - set(SEMANTICS))
    if unknown:
        raise DataLayoutError(
            f"--data {data}: answer types {unknown} are not the competition's ({', '.join(SEMANTICS)})"
        )
    out = [
        Question(
            i,
            str(r["question"]),
            str(r["answer"]),
            str(r["type"]).strip(),
            str(r["dataset"]),
            str(r["sample_answer"]) if "sample_answer" in qa.columns else None,
        )  # fmt: skip
        for i, r in enumerate(qa.to_dict("records"))
        if not types or str(r["type"]).strip() in types
    ]
    if limit is not None and limit < len(out):
        out = sorted(random.Random(seed).sample(out, limit), key=lambda q: q.index)
    return out


def table_path(data: str | Path, dataset: str, *, lite: bool = False) -> Path:
    """Where a dataset's table is; FileNotFoundError naming both places looked at."""
    root = Path(data).expanduser()
    name = "sample.parquet" if lite else "all.parquet"
    for cand in (root / dataset / name, root / "data" / dataset / name):
        if cand.is_file():
            return cand
    raise FileNotFoundError(
        f"the table of dataset {dataset!r} is not at {root / dataset / name} nor {root / 'data' / dataset / name}"
    )


def table(data: str | Path, dataset: str, *, lite: bool = False) -> pd.DataFrame:
    """A dataset's table (read once per run; each question gets its own copy)."""
    return _table(str(table_path(data, dataset, lite=lite))).copy()


@lru_cache(maxsize=4)
def _table(path: str) -> pd.DataFrame:
    return pd.read_parquet(path)
