"""The seeded data generators (math word problems, the search questions): deterministic, sized, split-disjoint,
with correct answers; the search config evaluates on its held-out split."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from cave.training.config import ConfigError, parse_config
from cave.training.datasets import generate, math_word_problems, normalize_question, split_of

from tests.training.test_rollout import TEAM

ROOT = Path(__file__).resolve().parents[2]

# the numbers of each template, in the order they appear in the question -> the answer
RECOMPUTE = {
    "add": lambda n: n[0] + n[1],
    "sub": lambda n: n[0] - n[1],
    "mul": lambda n: n[0] * n[1],
    "div": lambda n: n[0] // n[1] if n[0] % n[1] == 0 else None,
    "mul_sub": lambda n: n[0] * n[1] - n[2],
    "add_sub": lambda n: n[0] + n[1] - n[2],
    "add_mul": lambda n: n[0] * (n[1] + n[2]),
    "mul_sub_money": lambda n: n[0] * n[1] - n[2],
    "mul_sub_add_mul": lambda n: n[0] * n[1] - n[2] + n[3] * n[4],
    "mul_mul_sub": lambda n: n[0] * n[1] * n[2] - n[3],
    "div_mul_add": lambda n: n[0] // n[1] * n[2] + n[3] if n[0] % n[1] == 0 else None,
}


def test_sizes_determinism_and_disjoint_splits():
    train, test = generate("math_word", "train"), generate("math_word", "test")
    assert (len(train), len(test)) == (1000, 200)
    assert train == generate("math_word", "train") and test == math_word_problems("test", 200, seed=0)
    assert math_word_problems("train", 50, seed=1) != train[:50]  # another seed, other problems
    assert math_word_problems("train", 50) == train[:50]  # a smaller n is a prefix
    keys = [normalize_question(p["question"]) for p in train]
    assert len(set(keys)) == len(keys)  # deduplicated within a split
    # disjoint across splits, whatever the seeds: the split is a hash of the question alone
    other_seed_test = {normalize_question(p["question"]) for p in math_word_problems("test", 200, seed=7)}
    assert not set(keys) & ({normalize_question(p["question"]) for p in test} | other_seed_test)
    assert all(split_of(p["question"]) == "train" for p in train)
    assert all(split_of(p["question"]) == "test" for p in test)
    assert {p["steps"] for p in test} == {1, 2, 3}
    with pytest.raises(ValueError, match="unknown split 'dev'"):
        math_word_problems("dev", 3)


def test_answers_are_exact_integers_that_guessing_misses():
    problems = generate("math_word", "train") + generate("math_word", "test")
    for p in problems:
        numbers = [int(x) for x in re.findall(r"\d+", p["question"])]
        assert RECOMPUTE[p["template"]](numbers) == p["answer"], p
        assert isinstance(p["answer"], int) and p["answer"] > 0
    answers = [p["answer"] for p in problems]
    assert len(set(answers)) > 0.5 * len(answers)  # spread out: no small set of guesses covers them
    assert sum(a >= 100 for a in answers) > 0.8 * len(answers)


def test_configs_name_a_split(tmp_path):
    cfg = parse_config({"team": TEAM, "data": {"generator": "math_word", "split": "test", "n": 5}})
    assert cfg.data.examples() == math_word_problems("test", 5)
    assert cfg.data.for_split("train").examples() == math_word_problems("train", 5)
    # a {split} placeholder in path: each split its own file
    for split in ("train", "test"):
        (tmp_path / f"p_{split}.jsonl").write_text(f'{{"question": "{split}?", "answer": 1}}\n')
    cfg = parse_config({"team": TEAM, "data": {"path": "p_{split}.jsonl"}}, base_dir=tmp_path)
    assert cfg.data.examples()[0]["question"] == "train?"
    assert cfg.data.for_split("test").examples()[0]["question"] == "test?"
    with pytest.raises(ValueError, match="no 'dev' split"):
        cfg.data.for_split("dev")
    # plain data has no splits: evaluating a held-out split says so
    plain = parse_config({"team": TEAM, "data": {"prompts": [{"question": "q", "answer": 1}]}})
    with pytest.raises(ValueError, match="data has no splits"):
        plain.data.for_split("test")


@pytest.mark.parametrize(
    ("data", "extra", "message"),
    [
        (
            {"generator": "math_wrod"},
            {},
            r"data\.generator: unknown data generator 'math_wrod'.*did you mean 'math_word'",
        ),
        (
            {"generator": "cave.benchmarks.search.corpus:nope"},
            {},
            r"data\.generator: module cave\.benchmarks\.search\.corpus has no function 'nope'",
        ),
        ({"generator": "no_such_pkg.mod:fn"}, {}, r"data\.generator: cannot import 'no_such_pkg\.mod'"),
        ({"generator": "math_word", "split": "dev"}, {}, r"data: split: 'dev' is not a split of generator math_word"),
        ({"path": "p_{split}.jsonl", "split": "dev"}, {}, r"data\.path: data file not found: .*p_dev\.jsonl"),
        (
            {"prompts": [{"question": "q"}]},
            {"eval_every": 2},
            r"\(top level\): eval_every: the periodic eval needs held-out data",
        ),
        (
            {"generator": "math_word"},
            {"eval_every": 2, "eval_split": "dev"},
            r"\(top level\): eval_split: unknown split 'dev'",
        ),
    ],
)
def test_bad_split_or_generator_is_a_config_error(tmp_path, data, extra, message):
    (tmp_path / "p_train.jsonl").write_text('{"question": "q", "answer": 1}\n')
    with pytest.raises(ConfigError, match=f"(?s)^t.yaml:1: {message}"):
        parse_config({"team": TEAM, "data": data, **extra}, base_dir=tmp_path, file="t.yaml")


# -- the search benchmark's questions, a generator named by import path ------------------------------------
SEARCH_CONFIG = ROOT / "training" / "configs" / "search_smollm2.yaml"
SEARCH_QA = "cave.benchmarks.search.corpus:split_questions"  # a generator by import path: training imports no benchmark


def test_search_qa_splits_are_disjoint_seeded_and_answerable():
    from cave.benchmarks.search.corpus import DEFAULT_SEED, make_corpus

    train, test = generate(SEARCH_QA, "train"), generate(SEARCH_QA, "test")
    assert len(train) == 1000 and len(test) == 200  # the registry's default sizes
    assert {q["id"] for q in train}.isdisjoint({q["id"] for q in test})
    assert {q["question"] for q in train}.isdisjoint({q["question"] for q in test})
    assert {q["split"] for q in train} == {"train"} and {q["split"] for q in test} == {"test"}
    assert {q["hops"] for q in test} == {1, 2}  # the seeded order mixes one- and two-hop questions
    assert generate(SEARCH_QA, "test", 5) == test[:5] and generate(SEARCH_QA, "test", 5, seed=1) != test[:5]
    everything = generate(SEARCH_QA, "test", 10_000)  # more than the split has: all of it
    assert len(everything) == len(make_corpus(DEFAULT_SEED).questions("test"))
    # every question belongs to the encyclopedia the search tool indexes
    known = {q["id"]: q for q in make_corpus(DEFAULT_SEED).qa}
    assert all(known[q["id"]]["answer"] == q["answer"] for q in train + test)


def test_search_config_names_a_split_and_has_a_held_out_one():
    from cave.training.config import load_config
    from cave.training.evaluate import eval_examples

    cfg = load_config(SEARCH_CONFIG)
    assert cfg.data.generator == SEARCH_QA and cfg.data.split == "train" and cfg.data.has_splits
    held_out = eval_examples(cfg, "test", limit=2)
    assert len(held_out) == 2 and all(q["split"] == "test" for q in held_out)
    assert not {q["id"] for q in held_out} & {q["id"] for q in cfg.data.examples()}


@pytest.mark.slow
def test_cave_train_eval_runs_the_search_config_on_the_test_split(tmp_path, monkeypatch, capsys):
    """`cave train eval search_smollm2.yaml --checkpoint base --limit 2 -k 1`, the model swapped for a tiny Llama."""
    import json

    import yaml
    from cave.training.cli import train_main

    from tests.training.test_rollout import save_tiny

    monkeypatch.setenv("CAVE_HOME", str(tmp_path / "cave-home"))  # the search index is built there
    data = yaml.safe_load(SEARCH_CONFIG.read_text())
    data["models"]["base"] = {"source": str(save_tiny(tmp_path / "tiny"))}
    data["max_tokens"] = 16
    config = tmp_path / "search.yaml"
    config.write_text(yaml.safe_dump(data))
    assert train_main(["eval", str(config), "--checkpoint", "base", "--limit", "2", "-k", "1", "-q"]) == 0
    report = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert report["split"] == "test" and report["problems"] == 2 and report["k"] == 1
    assert set(report["format_failure"]) <= {"router", "search", "answer"} and report["mean_turns"] >= 2
