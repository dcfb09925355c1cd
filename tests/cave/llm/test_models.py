"""Locating, assembling and verifying embedded GGUF models.

The assembly logic runs on small packages written into a temporary directory and put on
sys.path (found by the same importlib lookup as the real ones); the real packages are
checked too, when installed.
"""

from __future__ import annotations

import hashlib
import threading
from pathlib import Path

import pytest

from cave.llm import LLMError, models
from cave.llm.local import resolve_gguf

PART_A, PART_B = b"GGUF" + b"a" * 1000, b"b" * 777


@pytest.fixture
def fake_model(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> models.EmbeddedModel:
    """A two-part model in two importable packages, and a private CAVE_HOME."""
    site = tmp_path / "site"
    for pkg, name, data in [("cave_fake_part1", "part01.bin", PART_A), ("cave_fake_part2", "part02.bin", PART_B)]:
        (site / pkg / "data").mkdir(parents=True)
        (site / pkg / "__init__.py").write_text("raise RuntimeError('locating a part must not import its package')\n")
        (site / pkg / "data" / name).write_bytes(data)
    monkeypatch.syspath_prepend(str(site))
    monkeypatch.setenv("CAVE_HOME", str(tmp_path / "home"))
    spec = models.EmbeddedModel(
        name="fake",
        filename="fake.gguf",
        parts=(("cave_fake_part1", "data/part01.bin"), ("cave_fake_part2", "data/part02.bin")),
        sha256=hashlib.sha256(PART_A + PART_B).hexdigest(),
        size=len(PART_A + PART_B),
        pip="pip install cave-fake-part1 cave-fake-part2",
    )
    monkeypatch.setitem(models.MODELS, "fake", spec)
    return spec


def test_assembles_once_into_cave_home(fake_model: models.EmbeddedModel, tmp_path: Path) -> None:
    path = models.model_path("fake")
    assert path == tmp_path / "home" / "models" / "fake.gguf"
    assert path.read_bytes() == PART_A + PART_B
    assert not [p for p in path.parent.iterdir() if p.name.endswith(".part")]  # no temp files left


def test_stamp_skips_rehash_until_the_file_changes(
    fake_model: models.EmbeddedModel, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = models.model_path("fake")
    hashed: list[Path] = []
    real = models.sha256_file
    monkeypatch.setattr(models, "sha256_file", lambda p: hashed.append(p) or real(p))
    assert models.model_path("fake") == path and hashed == []  # stamp matched: no re-hash
    path.write_bytes(PART_A + b"X" * len(PART_B))  # same size, new content and mtime
    with pytest.raises(LLMError) as err:
        models.model_path("fake")
    assert hashed == [path]
    msg = str(err.value)
    assert fake_model.sha256 in msg and f"delete {path}" in msg and fake_model.pip in msg


def test_missing_part_names_the_package_and_the_extra(
    fake_model: models.EmbeddedModel, monkeypatch: pytest.MonkeyPatch
) -> None:
    broken = models.EmbeddedModel(**{**fake_model.__dict__, "parts": (*fake_model.parts, ("cave_fake_part3", "x.bin"))})
    monkeypatch.setitem(models.MODELS, "fake", broken)
    with pytest.raises(LLMError, match=r"missing cave_fake_part3\. Install the \[local\] extra: pip install cave-fake"):
        models.model_path("fake")


def test_parts_that_do_not_hash_right_leave_no_file(
    fake_model: models.EmbeddedModel, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(models.MODELS, "fake", models.EmbeddedModel(**{**fake_model.__dict__, "sha256": "0" * 64}))
    with pytest.raises(LLMError, match="concatenate to sha256"):
        models.model_path("fake")
    assert not list((models.models_dir()).glob("fake.gguf*"))


def test_concurrent_first_use_assembles_a_whole_file(fake_model: models.EmbeddedModel) -> None:
    results: list[Path | BaseException] = []

    def use() -> None:
        try:
            results.append(models.model_path("fake"))
        except BaseException as e:  # noqa: BLE001 - collected and asserted below
            results.append(e)

    threads = [threading.Thread(target=use) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert all(isinstance(r, Path) for r in results), results
    assert results[0].read_bytes() == PART_A + PART_B


def test_names_and_aliases() -> None:
    assert models.resolve_name("QWEN") == "qwen" and models.resolve_name("SmolLM2-135M-Instruct") == "smollm2"
    assert models.resolve_name("gpt-4") is None
    with pytest.raises(LLMError, match="unknown embedded model 'gpt-4'; known: qwen, qwen-1.5b, smollm2"):
        models.model_path("gpt-4")


def test_user_gguf_paths(tmp_path: Path) -> None:
    with pytest.raises(LLMError, match="neither an embedded model .* nor an existing .gguf file"):
        resolve_gguf(tmp_path / "nope.gguf")
    not_gguf = tmp_path / "model.gguf"
    not_gguf.write_bytes(b"PK\x03\x04 a zip")
    with pytest.raises(LLMError, match="not a GGUF file"):
        resolve_gguf(not_gguf)
    good = tmp_path / "good.gguf"
    good.write_bytes(b"GGUF" + b"\0" * 16)
    assert resolve_gguf(good) == good
    assert resolve_gguf(good, sha256=hashlib.sha256(good.read_bytes()).hexdigest()) == good
    with pytest.raises(LLMError, match="not the one you pinned"):
        resolve_gguf(good, sha256="f" * 64)


def test_real_packaged_models_are_found_without_importing_them() -> None:
    rows = {r["name"]: r for r in models.info()}
    assert rows["qwen-1.5b"]["default"] is True and rows["qwen"]["default"] is False
    for name in ["qwen", "qwen-1.5b", "smollm2"]:
        spec = models.MODELS[name]
        try:
            parts = models.locate_parts(spec)
        except LLMError as e:
            assert "Install the [local] extra" in str(e)
            continue
        assert sum(p.stat().st_size for p in parts) == spec.size
        assert rows[name]["installed"] is True


@pytest.mark.model
def test_real_default_model_verifies() -> None:
    """The shipped Qwen GGUF: assembled into the (default) cache and matching the pinned sha256."""
    from tests.cave.llm.conftest import embedded_or_skip

    path = embedded_or_skip("qwen")
    assert path.stat().st_size == 491_400_064
    models.verify(models.MODELS["qwen"], path, force=True)  # a full re-hash, not the stamp


@pytest.mark.model
def test_the_1_5b_model_assembles_verifies_and_answers() -> None:
    """Qwen2.5-Coder-1.5B from its 22 PyPI parts: joined once into the cache, sha256-checked, and it runs."""
    import asyncio

    from cave.llm import create_backend
    from tests.cave.llm.conftest import embedded_or_skip

    assert models.resolve_name("Qwen2.5-Coder-1.5B-Instruct") == "qwen-1.5b"
    path = embedded_or_skip("qwen-1.5b")
    assert path.stat().st_size == 1_117_320_768
    models.verify(models.MODELS["qwen-1.5b"], path, force=True)
    llm = create_backend("local", model="qwen-1.5b", n_ctx=512)
    try:
        reply = asyncio.run(
            llm.complete([{"role": "user", "content": "Reply with the single word: yes"}], max_tokens=4)
        )
    finally:
        asyncio.run(llm.aclose())
    assert "yes" in reply.text.lower()
