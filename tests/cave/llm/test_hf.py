"""The transformers backend: a tiny random Llama with a tokenizer trained here (offline, fast),
and the real SmolLM2 converted from its shipped GGUF."""

from __future__ import annotations

import asyncio
import math
from pathlib import Path
from typing import Any

import pytest

from tests.cave.llm.conftest import HAVE_LLAMA, embedded_or_skip, needs_torch

pytestmark = needs_torch

CHATML = (
    "{% for m in messages %}<|im_start|>{{ m['role'] }}\n{{ m['content'] }}<|im_end|>\n{% endfor %}"
    "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)
CORPUS = [
    "def add(a, b):\n    return a + b\n",
    "import pandas as pd\ndf = pd.read_csv('sales.csv')\nprint(df.groupby('region').sum())\n",
    "The quick brown fox jumps over the lazy dog. Sales by region, totals and averages.",
    "for i in range(10):\n    print(i * i)\n",
]


@pytest.fixture(scope="module")
def tiny() -> tuple[Any, Any]:
    return tiny_model()


def tiny_model() -> tuple[Any, Any]:
    """(model, tokenizer): a 2-layer random Llama and a byte-level BPE tokenizer with a ChatML template."""
    import torch
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    from tests.conftest import tiny_llama

    bpe = Tokenizer(models.BPE())
    bpe.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    bpe.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=400,
        special_tokens=["<|endoftext|>", "<|im_start|>", "<|im_end|>"],
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
    )
    bpe.train_from_iterator(CORPUS * 20, trainer)
    tokenizer = PreTrainedTokenizerFast(tokenizer_object=bpe, eos_token="<|im_end|>", pad_token="<|endoftext|>")
    tokenizer.chat_template = CHATML
    model = tiny_llama(len(tokenizer), kv_heads=2, positions=256, tie=False,
                       eos_token_id=tokenizer.eos_token_id, pad_token_id=tokenizer.pad_token_id)  # fmt: skip
    with torch.no_grad():  # spread the logits so sampling is far from uniform but not deterministic
        model.lm_head.weight.mul_(20)
    return model, tokenizer


MSGS = [{"role": "user", "content": "def add(a, b): return the sum"}]


def test_logprobs_are_those_of_the_sampling_distribution(tiny: tuple[Any, Any]) -> None:
    from cave.llm import generate_batch, score_responses

    model, tok = tiny
    for temperature in (0.7, 1.0, 0.0):
        [g] = generate_batch(model, tok, [MSGS], max_new_tokens=20, temperature=temperature, seed=1, stop_ids=set())
        assert len(g.token_ids) == len(g.logprobs) == 20 and g.finish_reason == "length"
        rescored = score_responses(model, [g.prompt_ids], [g.token_ids], temperature=temperature)[0]
        assert max(abs(a - b) for a, b in zip(rescored, g.logprobs, strict=True)) < 1e-4
        assert all(lp <= 0 for lp in g.logprobs)


def test_top_k_one_is_greedy_with_logprob_zero(tiny: tuple[Any, Any]) -> None:
    from cave.llm import generate_batch

    model, tok = tiny
    [greedy] = generate_batch(model, tok, [MSGS], max_new_tokens=12, temperature=0, stop_ids=set())
    [topk] = generate_batch(model, tok, [MSGS], max_new_tokens=12, temperature=1.0, top_k=1, seed=3, stop_ids=set())
    assert topk.token_ids == greedy.token_ids
    assert all(abs(lp) < 1e-6 for lp in topk.logprobs)  # the renormalized one-token distribution


def test_seed_reproduces_and_varies(tiny: tuple[Any, Any]) -> None:
    from cave.llm import generate_batch

    model, tok = tiny

    def sample(seed: int) -> list[int]:
        return generate_batch(model, tok, [MSGS], max_new_tokens=24, temperature=1.0, seed=seed, stop_ids=set())[
            0
        ].token_ids

    assert sample(5) == sample(5)
    assert sample(5) != sample(6)


def test_left_padded_batch_matches_single_prompts(tiny: tuple[Any, Any]) -> None:
    from cave.llm import generate_batch

    model, tok = tiny
    prompts = [MSGS, [{"role": "user", "content": "hi"}], [{"role": "system", "content": "Be brief."}, *MSGS]]
    batch = generate_batch(model, tok, prompts, max_new_tokens=16, temperature=0, stop_ids=set())
    assert len({len(g.prompt_ids) for g in batch}) == 3  # different lengths: padding really happened
    for p, g in zip(prompts, batch, strict=True):
        [single] = generate_batch(model, tok, [p], max_new_tokens=16, temperature=0, stop_ids=set())
        assert g.token_ids == single.token_ids
        assert max(abs(a - b) for a, b in zip(g.logprobs, single.logprobs, strict=True)) < 1e-4


def test_stops_on_end_token_and_stop_strings(tiny: tuple[Any, Any]) -> None:
    from cave.llm import generate_batch

    model, tok = tiny
    [free] = generate_batch(model, tok, [MSGS], max_new_tokens=16, temperature=0, stop_ids=set())
    end = free.token_ids[3]  # pretend the 4th greedy token is the end-of-turn token
    [stopped] = generate_batch(model, tok, [MSGS], max_new_tokens=16, temperature=0, stop_ids={end})
    assert stopped.finish_reason == "stop" and stopped.token_ids == free.token_ids[: free.token_ids.index(end) + 1]
    assert stopped.text == tok.decode(stopped.token_ids[:-1], skip_special_tokens=True)  # text excludes it
    word = free.text.strip()[2:5]
    assert word, free.text
    [cut] = generate_batch(model, tok, [MSGS], max_new_tokens=16, temperature=0, stop=[word], stop_ids=set())
    assert cut.finish_reason == "stop" and cut.text == free.text[: free.text.index(word)]


def test_backend_on_a_live_model_streams_usage_and_restores_train_mode(tiny: tuple[Any, Any]) -> None:
    import torch

    from cave.llm import Completion, TextDelta, TransformersLLM

    model, tok = tiny
    llm = TransformersLLM(model, tok, seed=0)
    assert llm.context_window == 256

    async def run() -> tuple[list[str], Completion, Completion]:
        items = [i async for i in llm.stream(MSGS, max_tokens=20, temperature=0.8, seed=4)]
        again = await llm.complete(MSGS, max_tokens=20, temperature=0.8, seed=4)
        return [i.text for i in items if isinstance(i, TextDelta)], items[-1], again

    model.train()
    deltas, final, again = asyncio.run(run())
    assert model.training  # put back as the trainer left it
    assert "".join(deltas) == final.text == again.text and final.token_ids == again.token_ids
    assert final.prompt_token_ids == llm.encode(MSGS)
    assert final.usage.prompt_tokens == len(final.prompt_token_ids)
    assert final.usage.completion_tokens == len(final.token_ids) == len(final.logprobs)
    # the trainer updates the weights in place: the backend samples from the new policy at once
    before = final.logprobs
    with torch.no_grad():
        model.lm_head.weight.add_(0.5 * torch.randn_like(model.lm_head.weight))
    after = asyncio.run(llm.complete(MSGS, max_tokens=20, temperature=0.8, seed=4))
    assert after.logprobs != before

    async def give_up_then_ask_again() -> Completion:
        async for item in llm.stream(MSGS, max_tokens=200, temperature=1.0, seed=1):
            if isinstance(item, TextDelta):
                break  # the caller stops reading: the worker must stop and release the model
        return await asyncio.wait_for(llm.complete(MSGS, max_tokens=3), timeout=30)

    assert asyncio.run(give_up_then_ask_again()).usage.completion_tokens == 3
    model.eval()


def test_backend_from_a_saved_directory_via_both_names(tiny: tuple[Any, Any], tmp_path: Path) -> None:
    from cave.llm import LLMError, TransformersLLM, create_backend

    model, tok = tiny
    model.save_pretrained(tmp_path)
    tok.save_pretrained(tmp_path)
    for llm in (create_backend("transformers", model=str(tmp_path)), create_backend("local", model=str(tmp_path))):
        assert isinstance(llm, TransformersLLM)
        c = asyncio.run(llm.complete(MSGS, max_tokens=5))
        assert c.usage.completion_tokens == 5 and len(c.logprobs) == 5
    with pytest.raises(LLMError, match="needs its tokenizer"):
        TransformersLLM(model)
    with pytest.raises(LLMError, match="not an HF-format checkpoint"):
        TransformersLLM(str(tmp_path / "nope"))


@pytest.mark.model
@pytest.mark.slow
def test_converted_smollm2_agrees_with_llama_cpp_on_tokens() -> None:
    """The shipped SmolLM2 GGUF converted to HF: it writes code, and both backends see the same prompt tokens."""
    from cave.llm import TransformersLLM, score_responses
    from cave.llm.convert import conversion_report, hf_checkpoint

    embedded_or_skip("smollm2")
    path = hf_checkpoint("smollm2")  # converted once into $CAVE_HOME/hf, then reused
    report = conversion_report(path)
    assert report["architecture"] == "LlamaForCausalLM" and report["parameters"] > 100_000_000
    llm = TransformersLLM(path)
    task = [
        {
            "role": "user",
            "content": "Write a Python function add(a, b) that returns a + b. Reply with only a code block.",
        }
    ]
    c = asyncio.run(llm.complete(task, max_tokens=40, temperature=0))
    assert "def add(a, b):" in c.text and "return a + b" in c.text
    rescored = score_responses(llm.model, [c.prompt_token_ids], [c.token_ids])[0]
    assert max(abs(a - b) for a, b in zip(rescored, c.logprobs, strict=True)) < 1e-3
    assert all(math.isfinite(lp) for lp in c.logprobs)
    if HAVE_LLAMA:  # the llama.cpp backend renders and tokenizes the same prompt to the same ids
        from cave.llm import LocalLLM

        local = LocalLLM("smollm2", n_ctx=512)
        try:
            assert local.encode(task) == llm.encode(task)
        finally:
            asyncio.run(local.aclose())
