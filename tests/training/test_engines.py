"""Rollout engines (cave.training.engines): the transformers engine, weight sync by name, the registry, clear refusals.

Fast: a tiny random Llama with SmolLM2's real tokenizer. The real vLLM server is tested in test_vllm_server.py.
"""

from __future__ import annotations

import asyncio
import copy
import doctest
import sys

import pytest
import torch
from cave.training import engines, vllm_server
from cave.training.engines import (
    ENGINES,
    PolicyEngine,
    build_engine,
    check_names,
    register_engine,
    trainable_weights,
)
from cave.training.vllm_server import launch_vllm_server

from tests.training.test_rollout import smollm2_tokenizer, tiny_llama

MSGS = [{"role": "user", "content": "What is 2 + 3?"}]


@pytest.fixture(scope="module")
def tok():
    return smollm2_tokenizer()


def complete(llm, **kw):
    return asyncio.run(llm.complete(MSGS, max_tokens=kw.pop("max_tokens", 8), temperature=1.0, seed=3, **kw))


def logprobs_under(model, c):
    from cave.llm.hf import score_responses

    return score_responses(model, [c.prompt_token_ids], [c.token_ids])[0]


def test_transformers_engine_on_the_trainers_own_model_needs_no_copy(tok):
    from cave.training.rollout import BatchedPolicyLLM

    model = tiny_llama(len(tok))
    engine = build_engine("transformers", model, tok)
    assert isinstance(engine, PolicyEngine) and isinstance(engine.llm, BatchedPolicyLLM)
    assert engine.model is model and engine.kind == "transformers"
    before = {n: p.data_ptr() for n, p in model.named_parameters()}
    engine.load_weights(trainable_weights(model))  # the same tensors: nothing to do
    assert {n: p.data_ptr() for n, p in model.named_parameters()} == before
    engine.sleep(), engine.wake(), engine.close()  # no-ops, and never an error
    c = complete(engine.llm)
    assert c.prompt_token_ids and c.token_ids and len(c.logprobs) == len(c.token_ids)
    assert logprobs_under(model, c) == pytest.approx(c.logprobs, abs=1e-4)


@pytest.mark.parametrize("batched", [True, False])
def test_load_weights_into_a_separate_copy_makes_it_sample_like_the_trainer(tok, batched):
    trainer = tiny_llama(len(tok), seed=0)
    engine = build_engine("transformers", tiny_llama(len(tok), seed=1), tok, batched=batched)
    c = complete(engine.llm)
    assert logprobs_under(trainer, c) != pytest.approx(c.logprobs, abs=1e-2)  # different weights so far

    engine.load_weights(trainable_weights(trainer, only_trainable=False))
    c = complete(engine.llm)
    assert logprobs_under(trainer, c) == pytest.approx(c.logprobs, abs=1e-4)
    assert engine.weight_version == 1


def test_partial_load_only_the_trainable_layers(tok):
    trainer = tiny_llama(len(tok))
    engine = build_engine("transformers", copy.deepcopy(trainer), tok)
    trainer.requires_grad_(False)
    trainer.model.layers[-1].requires_grad_(True)
    with torch.no_grad():
        for p in trainer.model.layers[-1].parameters():
            p.add_(torch.randn_like(p))
    partial = trainable_weights(trainer)
    assert partial and all(n.startswith("model.layers.1.") for n in partial)
    engine.load_weights(partial)
    for n, p in engine.model.state_dict().items():
        assert torch.equal(p, trainer.state_dict()[n]), n
    c = complete(engine.llm)
    assert logprobs_under(trainer, c) == pytest.approx(c.logprobs, abs=1e-4)


def test_load_weights_from_a_checkpoint_dir_and_dtype(tok, tmp_path):
    trainer = tiny_llama(len(tok))
    tiny_llama(len(tok), seed=5).save_pretrained(tmp_path)
    tok.save_pretrained(tmp_path)
    engine = build_engine("transformers", tmp_path, None, dtype=torch.bfloat16)  # tokenizer from the folder
    assert next(engine.model.parameters()).dtype == torch.bfloat16
    engine.load_weights(trainable_weights(trainer, only_trainable=False))  # fp32 -> bf16 on copy
    w = engine.model.model.layers[0].mlp.up_proj.weight
    assert torch.equal(w, trainer.model.layers[0].mlp.up_proj.weight.to(torch.bfloat16))


def test_unknown_names_and_wrong_shapes_are_refused_clearly(tok):
    engine = build_engine("transformers", tiny_llama(len(tok), seed=1), tok)
    good = dict(trainable_weights(tiny_llama(len(tok))))
    with pytest.raises(KeyError, match=r"1 of \d+ tensors do not name a parameter of LlamaForCausalLM.*model.lyr"):
        engine.load_weights({**good, "model.lyr.0.weight": torch.zeros(1)})
    with pytest.raises(ValueError, match=r"model.norm.weight: shape \(3,\) does not fit the model's \(32,\)"):
        engine.load_weights({"model.norm.weight": torch.zeros(3)})
    assert engine.weight_version == 0  # nothing was half-loaded


def test_registry_builds_by_name_and_refuses_unknown_engines(tok):
    assert {"transformers", "vllm", "vllm_server"} <= set(ENGINES)
    with pytest.raises(KeyError, match="unknown rollout engine 'sglang'; known rollout engines: transformers, vllm"):
        build_engine("sglang", "dir")

    @register_engine("echo-test")
    class Echo:
        def __init__(self, model, tokenizer, **settings):
            self.llm, self.settings = None, settings

        def load_weights(self, named_tensors):
            pass

        def sleep(self):
            pass

        def wake(self):
            pass

        def close(self):
            pass

    try:
        engine = build_engine("echo-test", "m", tok, answer=42)
        assert Echo.kind == "echo-test" and engine.settings == {"answer": 42} and isinstance(engine, PolicyEngine)
    finally:
        ENGINES.remove("echo-test")


def test_inprocess_vllm_refuses_clearly_without_vllm_or_cuda(tok):
    from cave.llm.base import LLMError
    from cave.llm.vllm import vllm_available

    ok, why = vllm_available()
    if ok:
        pytest.skip("vllm and CUDA are present: the refusal path does not apply")
    with pytest.raises(LLMError, match="needs vllm and a CUDA GPU") as err:
        build_engine("vllm", tiny_llama(len(tok)), tok)
    assert why in str(err.value)


def test_vllm_server_engine_errors_name_the_problem(tmp_path):
    from cave.training.vllm_server import free_port

    port = free_port()
    with pytest.raises(RuntimeError, match=f"the vLLM server at http://127.0.0.1:{port} does not answer"):
        build_engine("vllm_server", None, url=f"http://127.0.0.1:{port}/v1", sync_timeout=2)
    with pytest.raises(ValueError, match="give url= of a running server, or a model"):
        build_engine("vllm_server", None)


def test_launch_reports_a_server_that_dies_with_its_log(tmp_path):
    # this interpreter has no vllm: the server exits at once, and the error carries its log
    fake = tmp_path / "python"
    fake.write_text(f"#!/bin/sh\necho 'no vllm here' >&2\nexec {sys.executable} -c 'import sys; sys.exit(3)'\n")
    fake.chmod(0o755)
    with pytest.raises(RuntimeError, match=r"(?s)exited with status 3 before it was ready.*no vllm here"):
        launch_vllm_server(tmp_path, python=str(fake), timeout=60, log_path=tmp_path / "server.log")


def test_save_weights_unties_shared_tensors_and_checks_names(tmp_path):
    from safetensors.torch import load_file

    from cave.llm.vllm import save_weights

    shared = torch.arange(6, dtype=torch.float32).reshape(2, 3)
    path = save_weights({"a": shared, "b": shared, "c": shared.T}, tmp_path, dtype=torch.bfloat16)
    back = load_file(path)
    assert path.parent == tmp_path and not list(tmp_path.glob("*.tmp"))
    assert back["a"].dtype == torch.bfloat16 and torch.equal(back["b"].float(), shared)
    assert torch.equal(back["c"].float(), shared.T)
    check_names({"a": 1}, {"a", "b"}, "m")
    with pytest.raises(ValueError, match="no tensors"):
        save_weights({}, tmp_path)


def test_checkpoint_names_read_the_safetensors_headers(tok, tmp_path):
    tiny_llama(len(tok)).save_pretrained(tmp_path)
    names = engines.checkpoint_names(tmp_path)
    assert "model.layers.1.mlp.up_proj.weight" in names and "lm_head.weight" in names
    assert engines.checkpoint_names(tmp_path / "nowhere") is None


def test_doctests():
    result = doctest.testmod(engines, optionflags=doctest.NORMALIZE_WHITESPACE)
    assert result.attempted > 0 and result.failed == 0


def test_the_worker_extension_is_what_the_engines_call():
    from cave.llm import vllm, vllm_worker

    assert vllm.WEIGHT_SYNC_EXTENSION == "cave.llm.vllm_worker.WeightSync"
    assert callable(getattr(vllm_worker.WeightSync, vllm.WEIGHT_SYNC_METHOD))
    assert vllm_worker.METHOD == vllm.WEIGHT_SYNC_METHOD


def test_a_server_gets_the_worker_extension_and_nothing_else_of_cave():
    """A vLLM server runs in vLLM's own venv: its PYTHONPATH gets one folder with the extension module only."""
    import ast

    folder = vllm_server.worker_extension_dir()
    assert sorted(p.name for p in folder.iterdir()) == ["cave_vllm_worker.py"]
    assert vllm_server.SERVER_EXTENSION == "cave_vllm_worker.WeightSync"
    tree = ast.parse((folder / "cave_vllm_worker.py").read_text())
    imported = {a.name for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names}
    imported |= {n.module or "" for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)}
    assert not any(m == "cave" or m.startswith("cave.") for m in imported)
    assert vllm_server.has_weight_sync(vllm_server.SERVER_EXTENSION) and vllm_server.has_weight_sync(
        "cave.llm.vllm_worker.WeightSync"
    )
