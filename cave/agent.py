"""The code-as-action agent loop.

One step = one LLM call + running the ```python blocks of its reply (in order)
in a persistent runtime. The run ends when the code calls ``final_answer(value)``
(status ``success``; the value is the live object), on a reply without code
(status ``no_code``; the text is the answer), or after ``max_steps`` (status
``max_steps``, after one last summarizing call).

The loop is async inside and yields events; ``Agent.run`` is the sync edge:

    agent = Agent(model=Scripted(["```python\\nfinal_answer(len(sales))\\n```"]), runtime="inprocess")
    agent.runtime.inject("sales", df)
    result = agent.run("How many orders?")       # result.answer == len(df)

    async for event in agent.stream("..."):     # StepStarted, TextChunk, CodeStarted, Observation,
        ...                                     # StepFinished, Compacted, RunFinished, RunError

The system prompt is rendered from ``runtime.describe()`` once, at the start of a
session; after each step the observation carries what changed in the runtime (new
or changed variables, one line each). The conversation so only ever grows at its
end, so a backend's prefix cache (llama.cpp's KV cache, vLLM's prefix caching)
serves everything before the new step (``prompt_layout="rerender"`` re-renders
the system prompt before every call instead, as cave did before). The model sees
the variables it created without their contents travelling through the messages.

A reply without code ends the run only when it can be the answer: not right after a
failed cell, not before any code has looked at the given data, not while the task's
declared ``outputs`` are missing, and not when the task checks objects.
"""

from __future__ import annotations

import asyncio
import dataclasses
import os
import time
from collections.abc import AsyncIterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal, Protocol

from cave import prompts
from cave.blocking import run_blocking
from cave.cells import FINAL_VAR, Cell, Cells, FinalAnswer, final_answer, is_final_error
from cave.compaction import Compaction, next_index
from cave.events import (
    CodeStarted,
    Compacted,
    Event,
    Observation,
    RunError,
    RunFinished,
    RunStarted,
    StepFinished,
    StepStarted,
    TextChunk,
)
from cave.generation import Generation, Replying
from cave.given import Given, in_process, private_copy
from cave.history import answer_note, resume_messages
from cave.llm.base import LLM, Message, Usage, create_backend
from cave.review import contract as task_contract
from cave.review import fired, grouping, profile, prose, recovery, typed
from cave.review.acceptance import Acceptance, answer_notes
from cave.review.checks import CheckSpec, averify, failed_checks_note
from cave.review.feedback import Feedback
from cave.review.guard import guard_code, rereads
from cave.review.plain import plain_answer
from cave.runtimes.base import ExecError, Execution, Runtime, TransferError, VariableInfo, create_runtime
from cave.runtimes.describe import guide
from cave.trajectory import ANSWERED, RunStatus, Step, Trajectory
from cave.verification import Verifying

__all__ = [
    "Agent",
    "Cell",
    "CodeStarted",
    "Compacted",
    "Event",
    "FINAL_VAR",
    "FinalAnswer",
    "Observation",
    "RunError",
    "RunFinished",
    "RunResult",
    "RunStarted",
    "Skills",
    "StepFinished",
    "StepStarted",
    "TextChunk",
    "final_answer",
    "resume_messages",
]


class Skills(Protocol):
    """What the agent needs from an Agent Skills set (see cave.skills)."""

    def prompt_section(self) -> str: ...

    def install(self, runtime: Runtime) -> None: ...


@dataclass
class RunResult:
    answer: Any
    status: RunStatus
    trajectory: Trajectory

    @property
    def run_id(self) -> str:
        return self.trajectory.run_id

    @property
    def usage(self) -> Usage:
        return self.trajectory.usage

    @property
    def ok(self) -> bool:
        """The run ended with an answer: verified (``success``), unconfirmed (``unverified``) or prose."""
        return self.status in ANSWERED


# -- the agent -----------------------------------------------------------------------------------
class Agent(Compaction, Given, Replying, Feedback, Verifying):
    """A code-as-action agent: an LLM backend plus a persistent runtime.

    The runtime persists across ``run`` calls, so a second run sees what the first one left behind.

    Args:
        model: an LLM instance, or a registered backend name: "local" (the embedded default), "openai",
            "transformers", "vllm", "scripted" (see ``cave.llm.BACKENDS``).
        runtime: a Runtime, or a registered name: "inprocess" (zero-copy, trusted code), "kernel", "process",
            "sandbox" (see ``cave.runtimes.RUNTIMES`` and docs/threat-model.md).
        max_steps: most LLM calls in one ``run``; then the run ends with status ``max_steps``.
        max_tokens: most tokens in one reply.
        temperature: sampling temperature (0: greedy).
        seed: sampling seed; each step derives its own from it, so a run is reproducible.
        stop: stop sequences, e.g. ``["\n```\n"]`` to end a reply after its first code block.
        timeout: seconds per code block in the runtime (None: the runtime's own default).
        skills: Agent Skills to offer (a SkillSet, or names/folders): their descriptions go in the prompt and
            ``activate_skill(name)`` loads one.
        instructions: extra text appended to the system prompt.
        base_prompt: replaces cave's base instructions at the top of the system prompt (``prompts.INSTRUCTIONS``:
            a data analyst in a persistent session, how to work, final_answer), e.g. a two-line one for a
            function-calling test where the data-analysis advice is tokens the model does not need.
        prompt_budget: tokens the description of the runtime's variables may take in the prompt (default: a
            quarter of the context window, between 256 and 1500).
        observation_limit: characters of a block's output shown to the model (head and tail are kept).
        max_continuations: times a reply cut by ``max_tokens`` inside a code block is continued.
        retry_temperature: when the model repeats a failing block, that reply is sampled again once at this
            temperature (None: never).
        compact_at: fraction of the context window at which old observations are elided, then summarized.
        keep_recent: exchanges kept verbatim when the conversation is compacted.
        stream: stream tokens from the backend (events carry them as TextChunk).
        role: the name written on each step (a team's role name).
        checks: what the outputs must look like, by runtime variable (``"answer"``: the final answer), as
            ``cave.review.checks.CheckSpec`` or plain mappings. After final_answer they run in the runtime; a failure is
            fed back and the run goes on; ``success`` then means every check passed (else ``failed_checks``).
        prompt_layout: "stable" (default): the system prompt is rendered once per session and each observation
            ends with what changed in the runtime, so prompts only grow at the end and prefix caches stay valid;
            "rerender": the system prompt is rendered from ``describe()`` before every call. Unset: the
            ``CAVE_PROMPT_LAYOUT`` environment variable, else "stable" (benchmarks compare the two this way).
        review: before a final answer is accepted (when the task gives no checks), show the model a summary of
            it (type, shape, first rows, warnings) beside the task, once, to confirm or fix it. "auto" (the
            default): only an answer that looks wrong (empty, None, NaN, every value the same, True/False
            for a yes/no question: ``recovery.needs_review``); True: every answer; False: none. Unless False, an
            answer not in the form the task names (more decimals than it asks for, True for "Yes or No", a key
            of the final_answer({...}) it spells out missing) is first sent back once with the call that fixes
            it (``cave.review.answers``).
        outputs: runtime variables the task asks to be left behind; final_answer (or a prose answer) is not
            accepted while one of them is missing.
        response_prefix: text the reply starts with, e.g. "```python\n" so a small model writes code (sent to the
            backend as the ``prefix`` option: prompt tokens, never trained).
        insist_on_code: refuse a reply without code as the answer right after a failed cell or before any code
            looked at the given data (twice at most per run); False for roles whose plain reply is their output.
        verify: independent attempts that must agree with an answer before it is a ``success`` when the task declares
            no checks (``cave.review.agreement``): each solves the task again in a fresh runtime holding the given
            inputs as they were, with its own seed; a majority must agree (early exit once decided). An answer
            nothing confirmed ends ``unverified`` (``meta["unverified"]`` says why); 0 turns verification off, so
            every answer without checks ends ``unverified``; None: the caller verifies (a team's pattern, a training
            reward), and an accepted answer ends ``success`` as a role's turn does. A task done by calling the
            session's functions (``expect_calls``) is scored by its calls, not re-solved.
        expect_calls: the task is done by calling the session's functions (a function-calling test, a tool
            user): an answer (prose, or final_answer) before any of them was called is sent back once, listing
            them; a second one stands (e.g. "none of these fits the request").
        store: where runs are recorded step by step (``cave runs list``, ``cave runs show``): True for the default
            store ($CAVE_RUNS, else $CAVE_HOME/runs), a path to a SQLite file, or a ``cave.Store``; None (the
            default) records nothing (teams and training rollouts create many agents).
        model_options: keyword arguments for the backend when ``model`` is a name.
        runtime_options: keyword arguments for the runtime when ``runtime`` is a name.
    """

    def __init__(
        self,
        model: str | LLM = "local",
        runtime: str | Runtime = "inprocess",
        *,
        max_steps: int = 8,
        max_tokens: int = 768,
        temperature: float = 0.0,
        seed: int | None = None,
        stop: list[str] | None = None,
        timeout: float | None = None,
        skills: Skills | None = None,
        instructions: str | None = None,
        base_prompt: str | None = None,
        prompt_budget: int | None = None,
        observation_limit: int = 3000,
        max_continuations: int = 2,
        retry_temperature: float | None = 0.7,
        compact_at: float = 0.85,
        keep_recent: int = 2,
        stream: bool = True,
        role: str = "agent",
        checks: Mapping[str, CheckSpec | Mapping[str, Any]] | None = None,
        store: Any = None,
        model_options: dict[str, Any] | None = None,
        runtime_options: dict[str, Any] | None = None,
        prompt_layout: Literal["stable", "rerender"] | None = None,
        review: bool | Literal["auto"] = "auto",
        outputs: Sequence[str] = (),
        response_prefix: str | None = None,
        insist_on_code: bool = True,
        expect_calls: bool = False,
        verify: int | None = 1,
    ) -> None:
        self.llm: LLM = create_backend(model, **(model_options or {})) if isinstance(model, str) else model
        self.runtime: Runtime = (
            create_runtime(runtime, **(runtime_options or {})) if isinstance(runtime, str) else runtime
        )
        self.max_steps = max_steps
        self.max_tokens = max_tokens
        self.temperature = temperature
        self.seed = seed
        self.stop = list(stop) if stop else None
        self.timeout = timeout
        self.skills = skills
        self.instructions = instructions
        self.base_prompt = base_prompt
        window = getattr(self.llm, "context_window", 8192) or 8192
        self.prompt_budget = prompt_budget or max(256, min(1500, window // 4))
        self.observation_limit = observation_limit
        self.max_continuations = max_continuations
        self.compact_at = compact_at
        self.keep_recent = keep_recent
        self.use_stream = stream
        self.role = role
        self.store = store
        self.checks = {
            k: v if isinstance(v, CheckSpec) else CheckSpec.model_validate(v) for k, v in (checks or {}).items()
        }
        self.history: list[Message] = []  # earlier turns (task + answer), for multi-turn runs
        self.retry_temperature = retry_temperature
        self._override: dict[str, Any] = {}  # sampling overrides for the current step
        self._started = False
        self._count = getattr(self.llm, "count_tokens", prompts.estimate_tokens)
        prompt_layout = prompt_layout or os.environ.get("CAVE_PROMPT_LAYOUT") or "stable"
        if prompt_layout not in ("stable", "rerender"):
            raise ValueError(
                f"prompt_layout must be 'stable' or 'rerender', not {prompt_layout!r} (check $CAVE_PROMPT_LAYOUT)"
            )
        self.prompt_layout = prompt_layout
        if review not in (True, False, "auto"):
            raise ValueError(f"review must be True, False or 'auto', not {review!r}")
        self.review = review
        self.outputs = list(outputs)
        self.response_prefix = response_prefix or None
        self.insist_on_code = insist_on_code
        self.expect_calls = expect_calls
        if verify is not None and (isinstance(verify, bool) or not isinstance(verify, int) or verify < 0):
            raise ValueError(f"verify must be a whole number of attempts >= 0 (0: off) or None, not {verify!r}")
        self.verify = verify
        self.contract = task_contract.Contract()  # what the current task's text asks of its answer
        self._given_at_start: dict[str, Any] = {}  # copies of the given inputs, for independent attempts
        self._system: str | None = None  # the session's system prompt (stable layout)
        self._seen: dict[str, str] = {}  # what the model was last told of each variable (stable layout)
        self._renamed_columns = False  # the code renamed a given table's columns (column_names stands aside)
        self._created_columns: set[str] = (
            set()
        )  # column names the code wrote (column_names.separator_names leaves them)

    # -- sync and async edges ------------------------------------------------------------------
    def run(self, task: str, **kwargs: Any) -> RunResult:
        """Run to the end and return the result (sync). Use ``arun`` inside an event loop."""
        return run_blocking("Agent", self.arun, task, **kwargs)

    async def arun(self, task: str, *, on_event: Any = None, resume: Trajectory | None = None) -> RunResult:
        traj: Trajectory | None = None
        store = self._open_store()
        async for event in self.stream(task, resume=resume):
            if store is not None:
                store.on_event(event)  # every step as it happens: `cave runs list` shows SDK runs too
            if on_event is not None:
                on_event(event)
            if isinstance(event, RunFinished):
                traj = event.trajectory
        assert traj is not None
        return RunResult(traj.final_answer, traj.status, traj)

    def _open_store(self) -> Any:
        if self.store is None or self.store is False:
            return None
        if self.store is True or isinstance(self.store, str | os.PathLike):
            from cave.store import Store

            self.store = Store(None if self.store is True else self.store)
        return self.store

    # -- setup ---------------------------------------------------------------------------------
    def start(self) -> None:
        """Inject final_answer and install skills (once per runtime; again after a restart is harmless)."""
        if self._started:
            return
        self.runtime.inject_function(final_answer, description="finish the task with the result object")
        if self.skills is not None:
            self.skills.install(self.runtime)
        self._started = True

    async def describe(self) -> list[Any]:
        adescribe = getattr(self.runtime, "adescribe", None)
        if adescribe is not None:
            return await adescribe()
        if self.runtime.name == "inprocess":  # cheap, no I/O: skip the thread hop
            return self.runtime.describe()
        return await asyncio.to_thread(self.runtime.describe)

    async def system_prompt(self, infos: list[VariableInfo] | None = None) -> str:
        extra = []
        if self.skills is not None:
            extra.append(self.skills.prompt_section())
        if self.instructions:
            extra.append(self.instructions)
        infos = await self.describe() if infos is None else infos
        tables = sum(1 for v in infos if v.injected and v.type.endswith("DataFrame")) + len(self._database_tables())
        return prompts.render_system_prompt(
            [self._with_guide(v, tables) for v in infos],
            budget_tokens=self.prompt_budget,
            count_tokens=self._count,
            instructions=self.base_prompt or prompts.INSTRUCTIONS,
            extra_sections=extra,
        )

    def _with_guide(self, info: VariableInfo, tables: int = 1) -> VariableInfo:
        """A given object described with how to use it: a table's profile (``cave.review.profile``) and first
        rows, an engine's tables and columns. ``tables``: how many given tables share the prompt's budget."""
        reg = self.runtime.registered.get(info.name)
        if not info.injected or reg is None or reg.kind != "variable" or reg.host:
            return info
        text = guide(reg.value, info.name)
        limit = min(profile.LIMIT, self.prompt_budget * 4 * 3 // (5 * max(1, tables)))
        if text and type(reg.value).__name__ == "DataFrame":
            text = profile.profile(reg.value, limit) + _first_rows(text)
        elif text and (found := self._database_tables(info.name)):  # a database's tables get the same first look
            text += "".join(f"\ntable {t}: " + profile.profile(f, limit) for t, f in found.items())
        return dataclasses.replace(info, preview=text) if text else info

    async def _open_messages(self, task: str) -> list[Message]:
        """A new run's conversation: the system prompt (the session's own, in the stable layout), earlier turns,
        the task (followed, in a later turn, by what changed in the runtime since the model last saw it)."""
        if self.prompt_layout == "rerender":
            return [{"role": "system", "content": ""}, *self.history, {"role": "user", "content": task}]
        infos = await self.describe()
        if self._system is None:
            self._system = await self.system_prompt(infos)
            self._seen = prompts.state_lines(infos)
        else:
            task = self._with_state(task, infos)
        return [{"role": "system", "content": self._system}, *self.history, {"role": "user", "content": task}]

    def _with_state(self, text: str, infos: list[VariableInfo]) -> str:
        note = self._state_note(infos)
        return f"{text}\n\n{note}" if note else text

    def _state_note(self, infos: list[VariableInfo]) -> str:
        lines = prompts.state_lines(infos)
        note = prompts.state_note(
            self._seen, lines, budget_tokens=max(128, self.prompt_budget // 2), count_tokens=self._count
        )
        self._seen = lines
        return note

    # -- the loop ------------------------------------------------------------------------------
    async def stream(self, task: str, *, resume: Trajectory | None = None) -> AsyncIterator[Event]:
        """Run the task, yielding events. The last event is always RunFinished."""
        self.start()
        if resume is not None:
            traj = resume
            traj.status, traj.error, traj.finished_at = "running", None, None
            # the same contract as the run had before it stopped (its answer is reviewed and verified against it)
            self.contract = task_contract.read(traj.task) if self.review is not False else task_contract.Contract()
            messages = resume_messages(resume)
            if self.prompt_layout == "stable":
                if not messages[0].get("content"):
                    messages[0] = {"role": "system", "content": await self.system_prompt()}
                self._system = str(messages[0]["content"])
                self._seen = prompts.state_lines(await self.describe())
        else:
            traj = Trajectory(task=task)
            messages = await self._open_messages(task)
            self.contract = task_contract.read(task) if self.review is not False else task_contract.Contract()
            if self.verify and not self.checks and in_process(self.runtime):
                # attempts start from the inputs as given; in-process code changes the host's own objects, so they
                # are copied now (a kernel's host copies stay as given)
                self._given_at_start = {n: private_copy(r.value) for n, r in self.runtime.registered.items()}
            if described := self.contract.describe():
                traj.meta["contract"] = described
            traj.meta["head"] = len(messages)
        head = int(traj.meta.get("head", 2))  # system + earlier turns + task: never compacted away
        opening = dict(messages[head - 1])  # the task as asked: what later turns see of this one
        yield RunStarted(traj, resumed=resume is not None)
        try:
            while traj.status == "running" and _action_steps(traj) < self.max_steps:
                async for event in self._step(traj, messages, head):
                    yield event
            if traj.status == "success" and not self.checks and self.verify is not None and not self.expect_calls:
                await self._verify(traj)
            if traj.status == "running":
                async for event in self._summarize_at_limit(traj, messages):
                    yield event
                if traj.meta.get("failed_checks"):  # the last answer was refused: say so, not just max_steps
                    traj.status = "failed_checks"
                    traj.error = "the answer failed the task's checks: " + "; ".join(traj.meta["failed_checks"])
                await self._keep_held_answer(traj, "the run reached max_steps")
            if self._confirms_kept(traj):  # a held answer that kept its problem: agreement decides, not the hold
                await self._verify(traj)
        except (asyncio.CancelledError, KeyboardInterrupt):
            traj.status, traj.error = "interrupted", "interrupted by the user"
            traj.finished_at = time.time()
            raise
        except Exception as e:  # a backend or runtime failure: end the run with a clear status
            traj.status, traj.error = "error", f"{type(e).__name__}: {e}"
            yield RunError(traj.error, e)
        traj.finished_at = time.time()
        if traj.called_final_answer and not self.checks:  # (a task's checks name the answer's exact type)
            traj.final_answer = plain_answer(traj.final_answer, self.contract.kind)
        if traj.status in ("success", "no_code", "max_steps") or traj.called_final_answer:
            self.history += [opening, {"role": "assistant", "content": answer_note(traj)}]
        yield RunFinished(traj)

    async def _step(self, traj: Trajectory, messages: list[Message], head: int) -> AsyncIterator[Event]:
        if self.prompt_layout == "rerender" or not messages[0].get("content"):
            messages[0] = {"role": "system", "content": await self.system_prompt()}
        async for event in self._maybe_compact(traj, messages, head):
            yield event
        index = next_index(traj)
        yield StepStarted(index, self.max_steps)
        t0 = time.time()
        step = Step(index=index, role=self.role, messages=list(messages), run_id=traj.run_id, started_at=t0)
        step.team_run_id = traj.team_run_id
        gen = Generation()
        async for event in self._reply(traj, messages, head, step, gen):
            yield event
        blocks = prompts.extract_code(gen.text)
        gen.fill(step, time.time() - t0)
        messages.append({"role": "assistant", "content": gen.text})
        cut = gen.finish_reason == "length" and prompts.unclosed_code(gen.text) is not None
        if cut:  # a cell cut off at max_tokens is not run as if it were whole
            blocks = blocks[:-1]
            step.meta["cut_off"] = True

        if not blocks:
            refusal = None if cut else await self._prose_refusal(traj, gen.text)
            if refusal is None and not cut:
                traj.status, traj.final_answer = "no_code", gen.text.strip()
                await self._keep_held_answer(traj, "the run ended on a reply without code")
            else:
                step.observation = prompts.CUT_NOTE.format(max_tokens=self.max_tokens) if cut else str(refusal)
                traj.meta["prose_refused"] = traj.meta.get("prose_refused", 0) + (not cut)
                messages.append({"role": "user", "content": step.observation})
            step.duration = time.time() - t0
            traj.steps.append(step)
            yield StepFinished(step)
            return

        cells = Cells()
        async for event in self._run_blocks(traj, index, blocks, cells):
            yield event
        called = await self._prose_call(traj, gen.text, blocks, cells)
        if called:  # "the `final_answer(x)` function is called with the result": the model means the call
            step.meta["prose_call_run"] = called
            blocks = [*blocks, f"final_answer({called})"]
            async for event in self._run_blocks(traj, index, blocks, cells, first=len(blocks) - 1):
                yield event
            cells.formatted[-1] = prompts.PROSE_CALL_RUN.format(name=called) + "\n" + cells.formatted[-1]
        step.code = "\n\n".join(blocks)
        step.execution = Execution.merge(cells.executions)
        step.meta["blocks"] = cells.records
        step.observation = prompts.observation_message(cells.formatted, cells.skipped)
        if cut:
            fired.note(step, "cut_off", prompts.CUT_NOTE.format(max_tokens=self.max_tokens))
        previous = recovery.last_code_step(traj)
        if previous is not None and previous.code == step.code and traj.status == "running":
            fired.note(step, "repeat", self._repeat_note(step))  # greedy decoding loops; break the echo
        if traj.status == "running":
            messages.append({"role": "user", "content": await self._next_message(traj, step, cells.records)})
        step.duration = time.time() - t0
        traj.steps.append(step)
        yield StepFinished(step)

    async def _prose_call(self, traj: Trajectory, reply: str, blocks: list[str], cells: Cells) -> str | None:
        """The variable the reply passes to final_answer in its prose after blocks that ran without error and did
        not call it: that call is run for the model, and the answer goes through the review like any other. Told
        that such a call runs nothing, the 1.5B answered in prose or built the same variable again (development
        tasks: "The `final_answer(total_spend)` function is called with the result" and then a table in prose; "then
        you can call `final_answer(revenue_per_month)`" twice, with prose between, until max_steps)."""
        if traj.status != "running" or not cells.executions or not all(ex.ok for ex in cells.executions):
            return None
        names = [v.name for v in await self.describe()]
        return prose.uncalled_answer(reply, "\n\n".join(blocks), names)

    async def _run_blocks(
        self, traj: Trajectory, index: int, blocks: list[str], cells: Cells, first: int = 0
    ) -> AsyncIterator[Event]:
        """Run the reply's blocks in order from ``first``, into ``cells``, until one fails or gives the answer."""
        for b, code in enumerate(blocks):
            if b < first:
                continue
            yield CodeStarted(index, b, code)
            cell = await self._execute(code)
            ex = cell.execution
            cells.executions.append(ex)
            record = {"code": code, "execution": ex.to_dict(), "final": cell.final}
            if cell.notes:
                record["notes"] = cell.notes
            noted = fired.block_notes(ex, cell.notes)
            if noted:  # what this block's result tells the model (how often each speaks is measured on held-out)
                record["noted"] = noted
            cells.records.append(record)
            text = prompts.format_execution(ex, limit=self.observation_limit, notes=cell.notes)
            failures = await averify(self.runtime, self.checks) if cell.final and self.checks else []
            if failures:  # not accepted: the agent sees why and goes on
                text += "\n" + failed_checks_note(failures, recovery.answer_name(code))
                rows = grouping.granularity_problem(traj.task, cell.value, *self._form_tables())
                rows = rows or grouping.messy_keys(cell.value)
                if rows:  # "has 162 rows; expected exactly 12" says what, not why
                    text += f"\nNote: {rows}"
                    record.setdefault("noted", []).append("checks_granularity")
                record["checks"] = traj.meta["failed_checks"] = failures
            held, notes = None, ""
            marks = set(traj.meta)
            if cell.final and not failures:
                # the whole reply: its blocks were written together, before any of them ran
                notes = answer_notes(traj, cells.executions, code)
                held = await self.acceptance.hold(traj, cell.value, "\n\n".join(blocks), notes)
            if cell.final and not failures and not held and not self.checks and not self.expect_calls:
                held = self._contract_hold(traj, cell.value)  # the task's contract, after the specific holds
            if held:  # not accepted yet: an output is missing, or the answer goes to review first
                # which hold spoke: the marks it left in meta (how often each fires is measured on held-out)
                record["held_by"] = sorted(set(traj.meta) - marks - {"contract_problems"}) or ["unmarked"]
                text += "\n" + held
                record["held"] = "contract" if held.startswith(task_contract.NOTE_HEAD) else held.split(":", 1)[0]
            cells.formatted.append(text)
            yield Observation(index, b, ex, text, cell.final and not failures and not held)
            if cell.final and (failures or held):
                return
            if cell.final:
                await self._accept(traj, cell, blocks, cells.executions, notes)
                return
            if not ex.ok:
                cells.skipped = len(blocks) - b - 1
                return

    async def _accept(
        self, traj: Trajectory, cell: Cell, blocks: list[str], executions: list[Execution], notes: str
    ) -> None:
        """The run ends with this answer: ``success``, or ``failed_checks`` when it kept what it was held for."""
        value = cell.value if self.checks else await self.acceptance.settled_form(traj, cell.value)
        traj.status, traj.final_answer = "success", value
        if self.checks:  # the task's own checks passed: they define success
            traj.meta.pop("failed_checks", None)
            traj.meta["checks"] = {"passed": sorted(self.checks)}
            return
        # what the reply's earlier blocks printed, less their printed literals (typed.seen_text)
        shown = "\n".join(typed.less_literals(e.stdout, c) for e, c in zip(executions[:-1], blocks, strict=False))
        kept = await self.acceptance.kept(traj, cell.value, notes, cell.code, shown)
        if kept:  # the answer stands, but not as a success: it still has what it was held for
            traj.status, traj.meta["failed_checks"], traj.meta["kept_problems"] = "failed_checks", kept, True
            traj.meta["held_kept"] = True  # the review's own suspicion, no check the task declared (_confirms_kept)
            traj.error = "the answer kept problems it was held for: " + "; ".join(kept)

    async def _keep_held_answer(self, traj: Trajectory, ended: str) -> None:
        """A run that ended on prose after its answer was held ends with that answer (``Acceptance.keep_held``)."""
        await self.acceptance.keep_held(traj, ended, lambda: asyncio.to_thread(self.runtime.retrieve, FINAL_VAR))

    @property
    def acceptance(self) -> Acceptance:
        """The holds a final answer goes through, with this agent's settings (see cave.review.acceptance)."""
        return Acceptance(
            review=self.review,
            checks=bool(self.checks),
            expect_calls=self.expect_calls,
            given_functions=self._given_functions,
            given_tables=self._given_tables,  # its holds read tables as the model was given them
            missing_outputs=self._missing_outputs,
            variables=self._live_values,
            restore_given=lambda: self._restore_given(list(self._protected())),
            form_tables=self._form_tables,
        )

    async def _execute(self, code: str) -> Cell:
        """Run one block of the model's code (after guard_code) in the runtime."""
        t0 = time.perf_counter()
        protected = self._protected()
        again = rereads(code, protected)
        kept = await self._kept_changes(code, again) if again else []
        restored = await self._restore_given([n for n in again if n not in kept])
        guarded, notes = guard_code(code, protected, self._given_functions())
        guarded, spaced = self._spaced_names(code, guarded, bool(restored))
        notes += spaced + restored
        try:
            ex = await self.runtime.aexecute(guarded, self.timeout)
        except FinalAnswer as signal:  # a runtime that lets BaseExceptions through
            ex, is_final, value = Execution(duration=time.perf_counter() - t0), True, signal.value
        else:
            is_final, value = is_final_error(ex.error), None
            if is_final:  # the signal came back as an error type name (possibly across a process boundary)
                ex.error = None
                try:
                    value = await asyncio.to_thread(self.runtime.retrieve, FINAL_VAR)
                except TransferError as e:  # an answer an untrusted kernel cannot hand back: the model converts it
                    is_final = False
                    ex.error = ExecError("TransferError", f"{prompts.UNTRANSFERABLE_ANSWER} ({e})")
        self._restore_final_answer()
        return Cell(ex, is_final, value, notes, code)

    def _restore_final_answer(self) -> None:
        """Code can still shadow final_answer in ways guard_code does not see; put ours back (in-process only)."""
        ns = getattr(self.runtime, "namespace", None)
        if isinstance(ns, dict) and ns.get("final_answer") is not final_answer:
            ns["final_answer"] = final_answer

    async def _summarize_at_limit(self, traj: Trajectory, messages: list[Message]) -> AsyncIterator[Event]:
        async for event in self._maybe_compact(traj, messages, int(traj.meta.get("head", 2))):
            yield event  # the summary's question must fit in the window too
        index = next_index(traj)
        yield StepStarted(index, self.max_steps)
        convo = [*messages, {"role": "user", "content": prompts.MAX_STEPS_PROMPT}]
        t0 = time.time()
        step = Step(index=index, role=self.role, messages=convo, run_id=traj.run_id, kind="summary", started_at=t0)
        gen = Generation()
        async for event in self._generate(index, convo, gen, prose=True):
            yield event
        gen.fill(step, time.time() - t0)
        step.duration = step.llm_duration
        traj.steps.append(step)
        traj.status, traj.final_answer = "max_steps", gen.text.strip()
        yield StepFinished(step)

    # -- resume --------------------------------------------------------------------------------
    async def replay(self, trajectory: Trajectory) -> int:
        """Re-run the successful code blocks of stored steps, rebuilding runtime state. Returns blocks run."""
        self.start()
        n = 0
        for step in trajectory.steps:
            for block in step.meta.get("blocks", []):
                ex = block.get("execution") or {}
                if block.get("final") or ex.get("error") or ex.get("timed_out"):
                    continue
                await self.runtime.aexecute(block["code"], self.timeout)
                n += 1
        return n


# -- helpers -------------------------------------------------------------------------------------
def _first_rows(guide_text: str) -> str:
    """The first rows of a table's guide (``runtimes.describe.guide``), shown after its profile."""
    _, sep, rows = guide_text.partition("\nfirst rows:\n")
    return f"\nfirst rows:\n{rows}" if sep else ""


def _action_steps(traj: Trajectory) -> int:
    return sum(1 for s in traj.steps if s.kind == "action")
