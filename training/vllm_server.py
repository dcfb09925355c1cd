"""The ``vllm_server`` rollout engine: a vLLM OpenAI-compatible server at any URL, reached with cave's ``openai``
backend, and ``launch_vllm_server`` to start one as a subprocess.

Weight sync writes a safetensors file into a folder both sides can read and calls the dev-mode
``/collective_rpc`` endpoint (the server runs with ``VLLM_SERVER_DEV_MODE=1`` and
``--worker-extension-cls cave_vllm_worker.WeightSync``, the module ``cave/llm/vllm_worker.py`` put on its
PYTHONPATH by ``worker_extension_dir``), then ``/reset_prefix_cache``.
"""

from __future__ import annotations

import contextlib
import logging
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import httpx
from cave.training.engines import check_names, checkpoint_names, model_folder, register_engine

from cave.llm.vllm import WEIGHT_SYNC_EXTENSION as WORKER_EXTENSION
from cave.llm.vllm import WEIGHT_SYNC_METHOD

__all__ = [
    "SERVER_EXTENSION",
    "VLLMServer",
    "VLLMServerEngine",
    "default_vllm_python",
    "free_port",
    "has_weight_sync",
    "launch_vllm_server",
    "worker_extension_dir",
]

log = logging.getLogger(__name__)

SERVER_EXTENSION = "cave_vllm_worker.WeightSync"  # the weight-sync extension, as a vLLM server imports it


def worker_extension_dir() -> Path:
    """A new folder holding cave/llm/vllm_worker.py as ``cave_vllm_worker.py``, for a vLLM server's PYTHONPATH.

    The server runs in vLLM's own venv, which need not have cave installed; the module imports nothing from cave,
    and only it is exposed (putting cave's own folders on the path would shadow vLLM's modules).
    """
    from cave.llm import vllm_worker

    folder = Path(tempfile.mkdtemp(prefix="cave-vllm-ext-"))
    shutil.copyfile(vllm_worker.__file__, folder / "cave_vllm_worker.py")
    return folder


def has_weight_sync(extension: object) -> bool:
    return any(name in str(extension) for name in (WORKER_EXTENSION, SERVER_EXTENSION))


class VLLMServer:
    """A vLLM OpenAI-compatible server subprocess (``launch_vllm_server``); a context manager that stops it."""

    def __init__(self, process: subprocess.Popen, url: str, log_path: Path, model: str, command: list[str]) -> None:
        self.process, self.url, self.log_path, self.model, self.command = process, url, log_path, model, command
        self.started_s = 0.0  # seconds until /health answered

    def log_tail(self, n: int = 40) -> str:
        try:
            return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-n:])
        except OSError:
            return ""

    def alive(self) -> bool:
        return self.process.poll() is None

    def close(self, timeout: float = 30.0) -> None:
        """Stop the server and the engine processes it started (its own process group)."""
        if self.process.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.process.pid, signal.SIGTERM)
            try:
                self.process.wait(timeout)
            except subprocess.TimeoutExpired:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(self.process.pid, signal.SIGKILL)
                self.process.wait(10)
        else:  # the server is gone; its engine/worker children may not be
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(self.process.pid, signal.SIGKILL)

    def __enter__(self) -> VLLMServer:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


def free_port(host: str = "127.0.0.1") -> int:
    with socket.socket() as s:
        s.bind((host, 0))
        return s.getsockname()[1]


def default_vllm_python() -> str:
    """``$CAVE_VLLM_PYTHON``, else the project's vLLM CPU venv (``scripts/install_vllm_cpu.sh``), else this one."""
    if os.environ.get("CAVE_VLLM_PYTHON"):
        return os.environ["CAVE_VLLM_PYTHON"]
    venv = Path(__file__).resolve().parents[1] / ".venv-vllm" / "bin" / "python"
    return str(venv) if venv.exists() else sys.executable


def launch_vllm_server(
    model_dir: str | os.PathLike[str],
    *,
    python: str | None = None,
    port: int | None = None,
    host: str = "127.0.0.1",
    extra_args: Sequence[str] = (),
    served_model_name: str = "policy",
    dtype: str | None = None,
    max_model_len: int | None = None,
    kv_cache_bytes: int | None = None,
    enable_sleep_mode: bool = False,
    logprobs_mode: str | None = "processed_logprobs",
    env: Mapping[str, str] | None = None,
    timeout: float = 600.0,
    log_path: str | os.PathLike[str] | None = None,
) -> VLLMServer:
    """Start ``python -m vllm.entrypoints.openai.api_server`` for ``model_dir`` with the weight-sync extension.

    Dev mode is on (``/collective_rpc``, ``/sleep``, ``/reset_prefix_cache``, ``/server_info``), this
    weight-sync extension is on the server's PYTHONPATH (``worker_extension_dir``), and the call returns once
    ``/health`` answers, or raises RuntimeError with the log's tail after ``timeout`` seconds or when the
    server exits. ``kv_cache_bytes`` sets the KV cache size outright: on CPU vLLM otherwise reserves a
    fraction of ALL memory and refuses to start when less is free. ``logprobs_mode="processed_logprobs"``
    reports logprobs under the sampling distribution (after temperature), as the transformers backend does.
    """
    python = python or default_vllm_python()
    port = port or free_port(host)
    url = f"http://{host}:{port}"
    cmd = [python, "-m", "vllm.entrypoints.openai.api_server", "--model", str(model_dir), "--host", host,
           "--port", str(port), "--served-model-name", served_model_name,
           "--worker-extension-cls", SERVER_EXTENSION]  # fmt: skip
    if dtype:
        cmd += ["--dtype", dtype]
    if max_model_len:
        cmd += ["--max-model-len", str(max_model_len)]
    if kv_cache_bytes:
        cmd += ["--kv-cache-memory-bytes", str(kv_cache_bytes)]
    if enable_sleep_mode:
        cmd += ["--enable-sleep-mode"]
    if logprobs_mode:
        cmd += ["--logprobs-mode", logprobs_mode]
    cmd += list(extra_args)
    full_env = {**os.environ, **(env or {}), "VLLM_SERVER_DEV_MODE": "1"}
    full_env["PYTHONPATH"] = os.pathsep.join(
        p for p in (str(worker_extension_dir()), full_env.get("PYTHONPATH", "")) if p
    )
    if log_path is None:
        fd, name = tempfile.mkstemp(prefix=f"vllm-server-{port}-", suffix=".log")
        os.close(fd)
        log_path = name
    log_path = Path(log_path)
    with open(log_path, "ab") as out:
        process = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                   env=full_env, start_new_session=True)  # fmt: skip
    server = VLLMServer(process, url, log_path, served_model_name, cmd)
    t0 = time.monotonic()
    try:
        while True:
            if process.poll() is not None:
                raise RuntimeError(
                    f"the vLLM server exited with status {process.returncode} before it was ready "
                    f"(command: {' '.join(cmd)}); log {log_path}:\n{server.log_tail()}"
                )
            with contextlib.suppress(httpx.HTTPError):
                if httpx.get(f"{url}/health", timeout=2.0).status_code == 200:
                    break
            if time.monotonic() - t0 > timeout:
                raise RuntimeError(f"the vLLM server was not ready after {timeout:.0f} s; log {log_path}:\n"
                                   f"{server.log_tail()}")  # fmt: skip
            time.sleep(0.5)
    except BaseException:
        server.close()
        raise
    server.started_s = time.monotonic() - t0
    return server


@register_engine("vllm_server")
class VLLMServerEngine:
    """A vLLM OpenAI-compatible server as a rollout engine.

    ``url``: a running server (dev mode, started with the weight-sync extension for ``load_weights``);
    without one, a server is launched for ``model`` (an HF directory, or a live model saved to a temp
    folder) with ``launch_vllm_server`` (``python=``, ``port=``, ``extra_args=``, ``launch={...}`` for
    its other settings) and stopped by ``close``. ``weights_dir``: a folder that this process and the
    server both read (default ``/dev/shm``, fine for a server on this machine).

    Capabilities are read from the server's ``/server_info``: without ``--enable-sleep-mode`` (vLLM
    refuses it on CPU) ``sleep``/``wake`` are logged no-ops; without the extension ``load_weights``
    raises an error that says how to start the server.
    """

    kind = "vllm_server"

    def __init__(
        self,
        model: Any = None,
        tokenizer: Any = None,
        *,
        url: str | None = None,
        served_model: str | None = None,
        weights_dir: str | os.PathLike[str] | None = None,
        weights_dtype: Any = None,
        sleep_level: int = 1,
        python: str | None = None,
        port: int | None = None,
        extra_args: Sequence[str] = (),
        launch: Mapping[str, Any] | None = None,
        api_key: str | None = None,
        request_timeout: float = 600.0,
        sync_timeout: float = 300.0,
        **llm_options: Any,
    ) -> None:
        from cave.llm.openai import OpenAICompatible
        from cave.llm.vllm import weights_folder

        self.server: VLLMServer | None = None
        self._tmp: tempfile.TemporaryDirectory | None = None
        self.names: set[str] | None = None  # the checkpoint's parameter names, when we can read them
        if isinstance(model, str | os.PathLike) and Path(model).is_dir():
            self.names = checkpoint_names(model)
        if url is None:
            if model is None:
                raise ValueError("vllm_server: give url= of a running server, or a model to launch one for")
            path, self._tmp = model_folder(model, tokenizer)
            self.names = checkpoint_names(path)
            try:
                options = dict(launch or {})
                options["extra_args"] = [*extra_args, *options.get("extra_args", ())]
                options.setdefault("python", python)
                options.setdefault("port", port)
                self.server = launch_vllm_server(path, **options)
            except BaseException:
                self._cleanup()
                raise
            url, served_model = self.server.url, self.server.model
        self.url = url.rstrip("/")
        if self.url.endswith("/v1"):
            self.url = self.url[:-3]
        self.headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
        self.http = httpx.Client(base_url=self.url, headers=self.headers, timeout=sync_timeout)
        self.weights_dir = Path(weights_dir) if weights_dir is not None else weights_folder()
        self.weights_dtype = weights_dtype
        self.sleep_level = sleep_level
        self.sleeping = False
        self.last_sync: dict[str, Any] = {}
        try:
            self.info = self._server_info()
            models = self.http.get("/v1/models").json().get("data") or []
        except BaseException:
            self.close()
            raise
        if self.names is None:  # a server on this machine: its model folder tells the names
            self.names = checkpoint_names(self.info.get("model"))
        model_ids = [m.get("id") for m in models]
        served_model = served_model or (model_ids[0] if model_ids else "default")
        max_len = next((m.get("max_model_len") for m in models if m.get("id") == served_model), None)
        llm_options.setdefault("context_window", int(max_len or 8192))
        self.llm = OpenAICompatible(f"{self.url}/v1", model=served_model, api_key=api_key, logprobs=True,
                                    token_ids=True, timeout=request_timeout, **llm_options)  # fmt: skip
        self.sleep_mode = bool(self.info.get("enable_sleep_mode"))
        self.sleep_reason = "" if self.sleep_mode else (
            f"the server at {self.url} runs without --enable-sleep-mode"
            + (" (vLLM refuses sleep mode on CPU)" if self.info.get("device") == "cpu" else "")
            + ": sleep/wake do nothing"
        )  # fmt: skip
        self._said_no_sleep = False

    # -- server facts ----------------------------------------------------------------------------------
    def _server_info(self) -> dict[str, Any]:
        """The facts we need from dev-mode ``/server_info`` (empty values when the server is not in dev mode)."""
        try:
            r = self.http.get("/server_info", params={"config_format": "json"})
        except httpx.HTTPError as e:
            raise RuntimeError(f"the vLLM server at {self.url} does not answer: {type(e).__name__}: {e}") from e
        if r.status_code == 404:
            return {"dev_mode": False}
        r.raise_for_status()
        cfg = (r.json() or {}).get("vllm_config") or {}
        if not isinstance(cfg, dict):  # an older server sends the config as a string
            text = str(cfg)
            return {"dev_mode": True, "enable_sleep_mode": "enable_sleep_mode=True" in text,
                    "worker_extension_cls": SERVER_EXTENSION if has_weight_sync(text) else "",
                    "device": "cpu" if "device_config=cpu" in text else ""}  # fmt: skip
        model_cfg = cfg.get("model_config") or {}
        return {
            "dev_mode": True,
            "model": model_cfg.get("model"),
            "enable_sleep_mode": bool(model_cfg.get("enable_sleep_mode")),
            "logprobs_mode": model_cfg.get("logprobs_mode"),
            "dtype": model_cfg.get("dtype"),
            "max_model_len": model_cfg.get("max_model_len"),
            "worker_extension_cls": (cfg.get("parallel_config") or {}).get("worker_extension_cls") or "",
            "device": (cfg.get("device_config") or {}).get("device"),
        }

    def _post(self, path: str, **kwargs: Any) -> httpx.Response:
        try:
            r = self.http.post(path, **kwargs)
        except httpx.HTTPError as e:
            raise RuntimeError(f"POST {self.url}{path} failed: {type(e).__name__}: {e}") from e
        if r.status_code >= 400:
            raise RuntimeError(f"POST {self.url}{path}: status {r.status_code}: {r.text[:500]}")
        return r

    def collective_rpc(self, method: str, *args: str, **kwargs: str) -> list[Any]:
        """Call a worker method (string arguments only, as dev mode allows); each worker's result."""
        body = {"method": method, "args": [str(a) for a in args], "kwargs": {k: str(v) for k, v in kwargs.items()}}
        r = self._post("/collective_rpc", json=body)
        return (r.json() or {}).get("results", []) if r.content else []

    # -- the verbs -------------------------------------------------------------------------------------------
    def load_weights(self, named_tensors: Mapping[str, Any] | str | os.PathLike[str]) -> None:
        """Write the tensors to ``weights_dir``, have every worker load them, reset the prefix cache."""
        from cave.llm.vllm import save_weights

        if not self.info.get("dev_mode"):
            raise RuntimeError(f"{self.url} is not in dev mode: start the server with VLLM_SERVER_DEV_MODE=1 "
                               f"(and --worker-extension-cls {SERVER_EXTENSION}) to sync weights")  # fmt: skip
        if not has_weight_sync(self.info.get("worker_extension_cls")):
            raise RuntimeError(f"the server at {self.url} has no weight-sync extension: start it with "
                               f"--worker-extension-cls {SERVER_EXTENSION} and cave.training.engines."
                               "worker_extension_dir() on its PYTHONPATH")  # fmt: skip
        t0 = time.perf_counter()
        if isinstance(named_tensors, str | os.PathLike):
            path, written = Path(named_tensors), False
        else:
            if self.names is not None:
                check_names(named_tensors, self.names, f"the model served at {self.url}")
            path, written = save_weights(named_tensors, self.weights_dir, dtype=self.weights_dtype), True
            os.chmod(path, 0o644)  # the server may run as another user
        t1 = time.perf_counter()
        if self.sleeping:  # a sleeping server's weights come back first; its KV cache sleeps until wake()
            self._post("/wake_up", params={"tags": "weights"})
        try:
            results = self.collective_rpc(WEIGHT_SYNC_METHOD, str(path))
        finally:
            if written:
                path.unlink(missing_ok=True)
        reset = self._post("/reset_prefix_cache").json().get("success", True)
        if not reset:  # blocks still held by running requests: the trainer syncs between rollouts, so rare
            log.warning("%s: the prefix cache was not reset (requests still running)", self.url)
        first = results[0] if results and isinstance(results[0], dict) else {}
        self.last_sync = {"tensors": first.get("loaded"), "write_s": t1 - t0, "load_s": first.get("seconds"),
                          "total_s": time.perf_counter() - t0, "prefix_cache_reset": bool(reset)}  # fmt: skip

    def sleep(self) -> None:
        if not self.sleep_mode:
            if not self._said_no_sleep:
                log.info(self.sleep_reason)
                self._said_no_sleep = True
            return
        if not self.sleeping:
            self._post("/sleep", params={"level": self.sleep_level})
            self.sleeping = True

    def wake(self) -> None:
        if self.sleeping:
            self._post("/wake_up")
            self.sleeping = False

    def close(self) -> None:
        with contextlib.suppress(Exception):
            self.http.close()
        if self.server is not None:
            self.server.close()
            self.server = None
        self._cleanup()

    def _cleanup(self) -> None:
        if self._tmp is not None:
            self._tmp.cleanup()
            self._tmp = None

    def __enter__(self) -> VLLMServerEngine:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()
