"""The running batch's KV written in place (cave.llm.batch_cache) and float32 attention for half-precision CPU decoding
(cave.llm.cpu_attention): the same numbers as transformers' own cache and attention, fewer allocations."""

from __future__ import annotations

import threading
import time
from typing import Any

import pytest

from tests.cave.llm.conftest import needs_torch
from tests.cave.llm.test_engine import encoded
from tests.cave.llm.test_hf import tiny_model

pytestmark = needs_torch


def kv(batch: int, length: int, seed: int) -> Any:
    import torch

    g = torch.Generator().manual_seed(seed)
    return torch.randn(batch, 2, length, 4, generator=g)


def test_a_slack_layer_holds_what_a_dynamic_layer_holds_through_every_operation() -> None:
    import torch
    from transformers.cache_utils import DynamicLayer

    from cave.llm.batch_cache import SlackLayer

    k0, v0 = kv(3, 5, 0), kv(3, 5, 1)
    slack, plain = SlackLayer(k0, v0, slack=2), DynamicLayer()
    plain.update(k0, v0)
    buffers = []
    for step in range(5):  # two writes fit, the third reallocates with room again
        k, v = kv(3, 1, 10 + step), kv(3, 1, 20 + step)
        got, want = slack.update(k, v), plain.update(k, v)
        buffers.append(slack.buffer_keys)
        assert all(torch.equal(a, b) for a, b in zip(got, want, strict=True))
    assert buffers[0] is buffers[1] and buffers[1] is not buffers[2]  # written in place until the room ran out
    assert slack.get_seq_length() == plain.get_seq_length() == 10

    slack.drop_left(3)  # left padding no row attends to: a view, no copy
    assert torch.equal(slack.keys, plain.keys[:, :, 3:]) and slack.get_seq_length() == 7
    index = torch.tensor([2, 0])
    slack.batch_select_indices(index)
    assert torch.equal(slack.keys, plain.keys[index][:, :, 3:]) and torch.equal(
        slack.values, plain.values[index][:, :, 3:]
    )
    got = slack.update(kv(2, 1, 99), kv(2, 1, 98))  # rows that were kept still decode in place
    assert got[0].shape == (2, 2, 8, 4) and torch.equal(got[0][:, :, -1:], kv(2, 1, 99))

    snapshot = slack.keys.clone()
    slack.crop(-2)  # positions taken back (speculative decoding): the next write goes where they were
    assert torch.equal(slack.keys, snapshot[:, :, :-2])
    slack.update(snapshot[:, :, -2:], slack.values[:, :, -2:].clone())
    assert torch.equal(slack.keys, snapshot)
    slack.batch_repeat_interleave(2)
    assert torch.equal(slack.keys, snapshot.repeat_interleave(2, dim=0))
    slack.reorder_cache(torch.tensor([0, 2]))
    assert torch.equal(slack.keys, snapshot) and slack.update(kv(2, 1, 7), kv(2, 1, 7))[0].shape[2] == 9
    slack.crop(-1)

    new = kv(1, 4, 5)  # a joining row, shorter than the running width: left-padded with zeros
    running = slack.keys.clone()
    slack.join([new], [new], 9)
    assert slack.keys.shape == (3, 2, 9, 4)
    assert torch.equal(slack.keys[:2, :, 1:], running) and not slack.keys[:2, :, :1].any()
    assert torch.equal(slack.keys[2:, :, 5:], new) and not slack.keys[2:, :, :5].any()


def test_rows_leave_and_join_in_place_and_hold_what_a_dynamic_layer_holds() -> None:
    """Leaving rows in ``fill_from_end``'s order and joining rows no wider than the running ones touch only the rows
    they move: the buffers stay the same objects, and the layer holds what transformers' own layer holds."""
    import torch
    from transformers.cache_utils import DynamicLayer

    from cave.llm.batch_cache import SlackLayer, fill_from_end

    k0, v0 = kv(6, 5, 0), kv(6, 5, 1)
    slack, plain = SlackLayer(k0, v0, slack=4), DynamicLayer()
    plain.update(k0, v0)
    buffer, spare = slack.buffer_keys, slack.buffer_keys.shape[0] - 6
    assert spare >= 4 and slack.keys.shape[0] == 6

    order = fill_from_end([0, 2, 3, 5], 6)  # rows 1 and 4 leave: row 5 moves into row 1's place
    index = torch.tensor(order)
    slack.batch_select_indices(index)
    plain.batch_select_indices(index)
    assert (
        slack.buffer_keys is buffer and torch.equal(slack.keys, plain.keys) and torch.equal(slack.values, plain.values)
    )

    step = kv(4, 1, 3), kv(4, 1, 4)
    assert all(torch.equal(a, b) for a, b in zip(slack.update(*step), plain.update(*step), strict=True))

    new_k, new_v = [kv(1, 3, 5), kv(2, 6, 6)], [kv(1, 3, 7), kv(2, 6, 8)]  # narrower than and as wide as the running 6
    slack.join(new_k, new_v, 6)
    assert slack.buffer_keys is buffer and slack.keys.shape == (7, 2, 6, 4)
    want = torch.cat([plain.keys, torch.nn.functional.pad(new_k[0], (0, 0, 3, 0)), new_k[1]])
    assert torch.equal(slack.keys, want)
    assert torch.equal(slack.values[4:5, :, 3:], new_v[0]) and not slack.values[4:5, :, :3].any()

    # more rows than the spare ones, or a wider prompt: one copy of the batch, with spare rows again
    slack.join([kv(spare, 2, 9)], [kv(spare, 2, 9)], 6)
    assert slack.buffer_keys is not buffer and slack.keys.shape[0] == 7 + spare
    assert slack.buffer_keys.shape[0] > slack.keys.shape[0] and torch.equal(slack.keys[:7], want)
    wider = slack.buffer_keys
    slack.join([kv(1, 8, 10)], [kv(1, 8, 10)], 8)
    assert slack.buffer_keys is not wider and torch.equal(slack.keys[:7, :, 2:], want)
    # an order that is not fill_from_end's (a row moved within the new end): still right, by one copy
    rows = slack.keys.clone()
    slack.batch_select_indices(torch.tensor([1, 0]))
    assert torch.equal(slack.keys, rows[[1, 0]])


@pytest.fixture(scope="module")
def tiny() -> tuple[Any, Any]:
    return tiny_model()


def decode_with_joins(model: Any, tok: Any, slack: int) -> list[Any]:
    from cave.llm.engine import GenerationEngine

    ids = encoded(tok)
    engine = GenerationEngine(model, tok, stop_ids=set(), window_s=0.001, max_wait_s=0.001, kv_slack=slack)
    first = engine.submit(ids[0], max_new_tokens=70, temperature=1.0, seed=1)
    deadline = time.monotonic() + 30
    while len(engine.stats.step_rows) < 4 and time.monotonic() < deadline:
        time.sleep(0.001)
    later = [engine.submit(p, max_new_tokens=n, temperature=1.0, seed=i)
             for i, (p, n) in enumerate(zip(ids[1:], [6, 50, 11, 33], strict=True))]  # fmt: skip
    gens = [first.result(timeout=60)] + [f.result(timeout=60) for f in later]
    assert engine.stats.joined == 4
    return gens


def test_decoding_in_place_samples_exactly_what_reallocating_samples(tiny: tuple[Any, Any]) -> None:
    """Rows join, leave and outgrow their room many times (slack 3) and sample the very tokens and logprobs that the
    reallocate-every-token cache (slack 0) gives (logprobs up to float rounding: attention reads strided views)."""
    model, tok = tiny
    baseline, in_place = decode_with_joins(model, tok, 0), decode_with_joins(model, tok, 3)
    for a, b in zip(baseline, in_place, strict=True):
        assert a.token_ids == b.token_ids
        assert max(abs(x - y) for x, y in zip(a.logprobs, b.logprobs, strict=True)) < 1e-5


def test_float32_attention_runs_only_in_its_block_its_thread_and_without_gradients(tiny: tuple[Any, Any]) -> None:
    """A bf16 model decoding over a float32 KV cache inside the block: attention in float32, closer to the float32
    model than bf16 attention is; the wrapper stays out of every other call."""
    import copy

    import torch

    from cave.llm import cpu_attention
    from cave.llm.batch_cache import slack_cache
    from cave.llm.cpu_attention import decode_kv_dtype, float32_attention
    from cave.llm.hf import cache_kwarg

    model, tok = tiny
    half = copy.deepcopy(model).to(torch.bfloat16).eval()
    assert decode_kv_dtype(half) == torch.float32 and decode_kv_dtype(model) is None  # float32 weights: nothing to do
    ids = torch.tensor([encoded(tok)[0]])
    q16, k32 = torch.zeros(1, dtype=torch.bfloat16), torch.zeros(1)
    seen: dict[str, bool] = {}

    def decode(m: Any, kv_dtype: Any) -> Any:  # prefill in the model's dtype, then 4 decode steps over the kept KV
        out = m(input_ids=ids[:, :-4], use_cache=True)
        layers = [(layer.keys, layer.values) for layer in out.past_key_values.layers]
        cache = slack_cache([[k] for k, _ in layers], [[v] for _, v in layers], ids.shape[1] - 4, dtype=kv_dtype)
        logits = []
        for i in range(ids.shape[1] - 4, ids.shape[1]):
            out = m(input_ids=ids[:, i : i + 1], use_cache=True, **{cache_kwarg(m): cache})
            logits.append(out.logits[:, -1].float())
        assert cache.layers[0].keys.dtype == (kv_dtype or m.dtype)
        return torch.cat(logits)

    with torch.no_grad():
        reference = decode(model, None)  # float32 weights, float32 attention
        plain = decode(half, None)  # bf16 everything
        assert not cpu_attention._mixed(q16, k32)
        with float32_attention() as installed:
            assert installed and cpu_attention._mixed(q16, k32) and not cpu_attention._mixed(q16, q16)
            t = threading.Thread(target=lambda: seen.update(other=cpu_attention._mixed(q16, k32)))
            t.start()
            t.join()
            mixed = decode(half, torch.float32)
            with torch.enable_grad():
                assert not cpu_attention._mixed(q16, k32)  # training forwards keep transformers' own attention
        assert not cpu_attention._mixed(q16, k32)
    assert seen == {"other": False}
    assert not torch.equal(mixed, plain)  # attention was computed otherwise ...
    # ... and not for the worse: no further from the float32 model than bf16 attention is (bf16 weights in both)
    assert (mixed - reference).abs().mean() <= (plain - reference).abs().mean() * 1.05


def test_an_engine_on_a_bf16_model_decodes_over_float32_kv(tiny: tuple[Any, Any]) -> None:
    import copy

    import torch

    from cave.llm.engine import GenerationEngine

    model, tok = tiny
    half = copy.deepcopy(model).to(torch.bfloat16).eval()
    engine = GenerationEngine(half, tok, stop_ids=set())
    assert engine.kv_dtype == torch.float32
    gens = engine.generate_many(encoded(tok), max_new_tokens=12, temperature=0)
    assert all(len(g.token_ids) == 12 for g in gens)
