"""Conversion caching, the lazy-import promise, vLLM's clean refusal, and the modules' doctests."""

from __future__ import annotations

import doctest
import importlib
import json
import subprocess
import sys
from pathlib import Path

import pytest

from cave.llm import LLMError
from tests.cave.llm.conftest import embedded_or_skip


def test_import_cave_llm_stays_light() -> None:
    code = (
        "import sys, cave.llm; "
        "print([m for m in ('torch', 'transformers', 'llama_cpp', 'vllm') if m in sys.modules]); "
        "print(sorted(cave.llm.BACKENDS))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.splitlines()
    assert out[0] == "[]"
    assert out[1] == "['local', 'openai', 'scripted', 'transformers', 'vllm']"


def test_vllm_refuses_clearly_without_vllm_or_cuda() -> None:
    from cave.llm.vllm import VLLMEngine, vllm_available

    ok, why = vllm_available()
    if ok:
        pytest.skip("vllm and CUDA are present: the refusal path does not apply")
    with pytest.raises(LLMError) as err:
        VLLMEngine("smollm2")
    msg = str(err.value)
    assert "pip install 'cave[gpu]'" in msg and why in msg and "backend 'openai'" in msg


@pytest.mark.gpu
def test_vllm_generates_with_token_ids_and_logprobs() -> None:
    from cave.llm.vllm import VLLMEngine, vllm_available

    ok, why = vllm_available()
    if not ok:
        pytest.skip(f"needs vllm and a CUDA GPU: {why}")
    embedded_or_skip("smollm2")
    import asyncio

    async def run():  # noqa: ANN202
        llm = VLLMEngine("smollm2", max_model_len=2048, gpu_memory_utilization=0.3)
        try:
            return await llm.complete([{"role": "user", "content": "Write add(a, b) in Python."}], max_tokens=32)
        finally:
            await llm.aclose()

    c = asyncio.run(run())
    assert c.text and len(c.token_ids) == len(c.logprobs) == c.usage.completion_tokens


def test_conversion_is_cached_and_atomic(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The caching logic around the (slow, real) conversion: done once, forced again, never half-written."""
    from cave.llm import convert

    embedded_or_skip("smollm2")
    monkeypatch.setenv("CAVE_HOME", str(tmp_path))
    calls: list[Path] = []

    def fake_convert(gguf: Path, out: Path, *, dtype: str) -> dict:
        calls.append(gguf)
        (Path(out) / "config.json").write_text("{}")
        return {"dtype": dtype}

    monkeypatch.setattr(convert, "convert_gguf", fake_convert)
    first = convert.hf_checkpoint("smollm2")
    assert first.parent == tmp_path / "hf" and (first / "config.json").is_file()
    assert json.loads((first / convert.MARKER).read_text())["model"] == "smollm2"
    assert convert.hf_checkpoint("SmolLM2") == first and len(calls) == 1  # cached
    assert convert.hf_checkpoint("smollm2", force=True) == first and len(calls) == 2

    def failing(gguf: Path, out: Path, *, dtype: str) -> dict:
        (Path(out) / "partial.bin").write_text("x")
        raise RuntimeError("out of memory")

    monkeypatch.setattr(convert, "convert_gguf", failing)
    with pytest.raises(RuntimeError):
        convert.hf_checkpoint("smollm2", dtype="float32")
    assert sorted(p.name for p in (tmp_path / "hf").iterdir()) == [first.name]  # nothing half-written
    with pytest.raises(LLMError, match="unknown embedded model 'llama-70b'"):
        convert.hf_checkpoint("llama-70b")


@pytest.mark.parametrize("module", ["cave.llm.base", "cave.llm.tool_calls", "cave.llm.models", "cave.llm.openai"])
def test_doctests(module: str) -> None:
    result = doctest.testmod(importlib.import_module(module))
    assert result.attempted > 0 and result.failed == 0
