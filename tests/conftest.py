"""Shared test builders. Tests import them (``from tests.conftest import tiny_llama``) or take the fixtures."""

from __future__ import annotations

from typing import Any

import pytest


def tiny_llama(
    vocab: int,
    *,
    hidden: int = 32,
    intermediate: int = 64,
    layers: int = 2,
    heads: int = 4,
    kv_heads: int = 4,
    positions: int = 2048,
    tie: bool = True,
    seed: int = 0,
    **config: Any,
) -> Any:
    """A randomly initialized Llama small enough for unit tests (a few ms a step); ``config``: more LlamaConfig fields.

    The one builder the test suites share: the policy, rollout, engine and backend tests each need a real HF model
    with a chosen vocabulary, not a mock.
    """
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(seed)
    cfg = LlamaConfig(
        vocab_size=vocab,
        hidden_size=hidden,
        intermediate_size=intermediate,
        num_hidden_layers=layers,
        num_attention_heads=heads,
        num_key_value_heads=kv_heads,
        max_position_embeddings=positions,
        tie_word_embeddings=tie,
        **config,
    )
    return LlamaForCausalLM(cfg)


@pytest.fixture(autouse=True, scope="session")
def _private_run_store(tmp_path_factory):
    """Tests never write to the user's run store: the default store lives in a temporary folder (the model
    cache, $CAVE_HOME, is left alone: models are joined and verified once)."""
    import os

    old = os.environ.get("CAVE_RUNS")
    os.environ["CAVE_RUNS"] = str(tmp_path_factory.mktemp("cave-runs"))
    yield
    if old is None:
        os.environ.pop("CAVE_RUNS", None)
    else:
        os.environ["CAVE_RUNS"] = old


@pytest.fixture(autouse=True, scope="session")
def _private_ray_temp_dir():
    """Ray's session folders (logs, sockets, spilled objects) go to a folder removed when the tests end, not to
    /tmp/ray, where every run's would pile up on a machine that keeps /tmp (a short path: Ray's socket paths must
    stay under 108 characters, which pytest's tmp_path does not)."""
    import os
    import shutil
    import tempfile

    old = os.environ.get("RAY_TMPDIR")
    folder = tempfile.mkdtemp(prefix="cave-ray-")
    os.environ["RAY_TMPDIR"] = folder
    yield
    shutil.rmtree(folder, ignore_errors=True)
    if old is None:
        os.environ.pop("RAY_TMPDIR", None)
    else:
        os.environ["RAY_TMPDIR"] = old


@pytest.fixture
def make_tiny_llama():
    """The ``tiny_llama`` builder as a fixture."""
    return tiny_llama
