"""Every path of the agent loop, driven by the Scripted backend against a real InProcessRuntime."""

from __future__ import annotations

import asyncio
import functools
from typing import Any

import pandas as pd
import pytest
from cave.runtimes.inprocess import InProcessRuntime

from cave import prompts
from cave.agent import Agent as _Agent
from cave.agent import (
    CodeStarted,
    Compacted,
    Observation,
    RunError,
    RunFinished,
    RunStarted,
    StepFinished,
    StepStarted,
    TextChunk,
)
from cave.compaction import SUMMARY_ROOM
from cave.llm.base import LLM, Completion, LLMError, Scripted, Usage

# These tests are about the agent loop; verification by agreement is tested in test_verify.py. Here the caller
# verifies (verify=None), so an accepted answer ends `success` as a role's turn does.
Agent = functools.partial(_Agent, verify=None)


def code(src: str, prose: str = "I will do it.") -> str:
    return f"{prose}\n```python\n{src}\n```"


@pytest.fixture
def sales() -> pd.DataFrame:
    return pd.DataFrame({"region": ["N", "S", "N", "E"], "units": [1, 2, 3, 4], "price": [10.0, 5.0, 10.0, 2.5]})


def make_agent(replies: Any, **kw: Any) -> Agent:
    return Agent(model=Scripted(replies) if not isinstance(replies, LLM) else replies, runtime=InProcessRuntime(), **kw)


async def collect(agent: Agent, task: str) -> list[Any]:
    return [ev async for ev in agent.stream(task)]


# -- ending the run ------------------------------------------------------------------------------
def test_final_answer_returns_the_live_object(sales):
    agent = make_agent([code("by = sales.groupby('region', as_index=False).units.sum()\nfinal_answer(by)")])
    agent.runtime.inject("sales", sales, "orders")
    result = agent.run("units per region")
    assert result.status == "success"
    assert isinstance(result.answer, pd.DataFrame)
    assert result.answer is agent.runtime.retrieve("by")  # the object itself, not a printed copy
    assert dict(zip(result.answer.region, result.answer.units, strict=True)) == {"E": 4, "N": 4, "S": 2}
    assert len(result.trajectory.steps) == 1
    assert result.trajectory.steps[0].meta["blocks"][0]["final"] is True


def test_final_answer_is_not_swallowed_by_except_exception():
    src = "try:\n    final_answer(42)\nexcept Exception:\n    print('swallowed')"
    result = make_agent([code(src), code("final_answer(0)")]).run("t")
    assert result.status == "success" and result.answer == 42
    assert "swallowed" not in (result.trajectory.steps[0].execution.stdout or "")


def test_final_answer_keeps_output_printed_before_it():
    result = make_agent([code("print('checking')\nfinal_answer('done')")]).run("t")
    assert result.answer == "done"
    assert result.trajectory.steps[0].execution.stdout == "checking\n"


def test_reply_without_code_ends_with_its_text():
    result = make_agent(["The answer is 7."]).run("t")
    assert result.status == "no_code"
    assert result.answer == "The answer is 7."
    assert result.trajectory.steps[0].code is None


def test_max_steps_ends_with_one_summarizing_call():
    llm = Scripted([code("x = 1"), code("x += 1"), "I found that x is 2; the task needs more steps."])
    agent = make_agent(llm, max_steps=2)
    result = agent.run("count")
    assert result.status == "max_steps"
    assert result.answer == "I found that x is 2; the task needs more steps."
    kinds = [s.kind for s in result.trajectory.steps]
    assert kinds == ["action", "action", "summary"]
    assert llm.calls[-1][-1]["content"] == prompts.MAX_STEPS_PROMPT
    assert agent.runtime.retrieve("x") == 2


def test_backend_failure_ends_the_run_with_status_error():
    events = asyncio.run(collect(make_agent([]), "t"))  # Scripted with no replies raises LLMError
    assert isinstance(events[-1], RunFinished)
    assert events[-1].trajectory.status == "error"
    assert "ran out of replies" in events[-1].trajectory.error
    assert any(isinstance(e, RunError) and isinstance(e.exception, LLMError) for e in events)


# -- errors, observations ------------------------------------------------------------------------
def test_error_becomes_an_observation_and_the_loop_continues():
    llm = Scripted([code("1 / 0"), code("final_answer('recovered')")])
    result = make_agent(llm).run("t")
    assert result.status == "success" and result.answer == "recovered"
    first = result.trajectory.steps[0]
    assert not first.execution.ok and first.execution.error.type == "ZeroDivisionError"
    assert "ZeroDivisionError: division by zero" in first.observation
    assert llm.calls[1][-1] == {"role": "user", "content": first.observation}  # the model saw it


def test_deep_traceback_keeps_its_last_frames():
    src = "def f(n):\n    if n == 0:\n        raise ValueError('bottom reached')\n    return f(n - 1)\nf(12)"
    result = make_agent([code(src), "stop"], max_steps=1).run("t")
    obs = result.trajectory.steps[0].observation
    assert "frames omitted" in obs
    assert obs.rstrip().endswith("ValueError: bottom reached")
    assert obs.count('File "<cell-') <= 4


def test_long_output_is_truncated_head_and_tail():
    src = "for i in range(20000):\n    print(f'line {i}')"
    agent = make_agent([code(src), "done"], observation_limit=2000)
    result = agent.run("t")
    obs = result.trajectory.steps[0].observation
    assert "line 0\n" in obs and "line 19999" in obs  # both ends survive
    assert "characters truncated" in obs
    assert len(obs) < 2200
    assert len(result.trajectory.steps[0].execution.stdout) > 100_000  # the full output is kept in the record


def test_trailing_value_is_shown():
    result = make_agent([code("x = 41\nx + 1"), "ok"]).run("t")
    assert result.trajectory.steps[0].observation == "Observation:\nOut: 42"


def test_blocks_run_in_order_and_an_error_skips_the_rest():
    reply = "First.\n```python\na = 1\n```\nThen.\n```python\nb = a + undefined\n```\n```python\nc = 3\n```"
    agent = make_agent([reply, "stop"])
    result = agent.run("t")
    step = result.trajectory.steps[0]
    assert [b["code"] for b in step.meta["blocks"]] == ["a = 1", "b = a + undefined"]
    assert "NameError" in step.observation and "1 later block not run" in step.observation
    assert agent.runtime.retrieve("a") == 1
    with pytest.raises(KeyError):
        agent.runtime.retrieve("c")


# -- the prompt ----------------------------------------------------------------------------------
def test_system_prompt_describes_injected_and_created_variables(sales):
    def add(a: int, b: int) -> int:
        """Add two numbers."""
        return a + b

    llm = Scripted([code("total = int(sales.units.sum())"), code("final_answer(total)")])
    agent = make_agent(llm)
    agent.runtime.inject("sales", sales, "one row per order")
    agent.runtime.inject_function(add)
    agent.run("t")
    first, second = llm.calls[0][0]["content"], llm.calls[1][0]["content"]
    assert "sales: pandas.DataFrame - 4 rows x 3 columns" in first and "one row per order" in first
    assert "first rows:" in first and "region" in first  # a given frame is shown with its first rows
    assert "add(a: int, b: int) -> int" in first and "Add two numbers." in first
    assert "total" not in first
    assert second == first  # the system prompt is stable: a prefix cache serves it on every later step
    observation = llm.calls[1][-1]["content"]
    # the state note comes first: what the model must act on (an error, a failed check) is what it reads last
    assert observation.startswith("Variables now in the session (new or changed):\n- total: int - 10\n\nObservation:")
    assert "final_answer" not in first.split("## ", 1)[1]  # the loop's own names are not listed as state


def test_rerender_layout_refreshes_the_system_prompt_every_step(sales):
    llm = Scripted([code("total = int(sales.units.sum())"), code("final_answer(total)")])
    agent = make_agent(llm, prompt_layout="rerender")
    agent.runtime.inject("sales", sales)
    agent.run("t")
    second = llm.calls[1][0]["content"]
    assert "## Variables you created\n- total: int - 10" in second
    assert "Variables now in the session" not in llm.calls[1][-1]["content"]


def test_stable_layout_only_appends_to_the_conversation(sales):
    llm = Scripted([code("a = 1"), code("b = a + 1"), code("final_answer(b)")])
    agent = make_agent(llm)
    agent.runtime.inject("sales", sales)
    assert agent.run("t").answer == 2
    for earlier, later in zip(llm.calls, llm.calls[1:], strict=False):
        assert later[: len(earlier)] == earlier  # every prompt extends the one before it
    # The message stream carries code and observations, not the data.
    assert all("N" not in m["content"] or m["role"] == "system" for m in llm.calls[1][1:] if "region" in m["content"])


def test_system_prompt_stays_within_its_budget():
    agent = make_agent([code("final_answer(1)")], prompt_budget=400)
    for i in range(300):
        agent.runtime.inject(f"table_{i}", list(range(i)), f"table number {i}")
    prompt = asyncio.run(agent.system_prompt())
    assert prompts.estimate_tokens(prompt) <= 400
    assert "more names not shown" in prompt


def test_multi_turn_second_run_sees_the_first_runs_state():
    llm = Scripted([code("threshold = 3\nfinal_answer(threshold)"), code("final_answer(threshold * 2)")])
    agent = make_agent(llm)
    first = agent.run("set a threshold")
    second = agent.run("double it")
    assert (first.answer, second.answer) == (3, 6)
    prompt = llm.calls[1]
    assert prompt[0] == llm.calls[0][0]  # the session's system prompt, unchanged
    assert [m["role"] for m in prompt[1:]] == ["user", "assistant", "user"]
    assert prompt[1]["content"] == "set a threshold"
    # What changed since the model last looked comes with the new task.
    assert prompt[-1]["content"] == "double it\n\nVariables now in the session (new or changed):\n- threshold: int - 3"
    # The earlier turn is shown as the code that finished it, so the model keeps writing code:
    # a prose note about the answer taught small models to reply with an invented result instead.
    assert prompt[2]["content"] == code("threshold = 3\nfinal_answer(threshold)")


# -- small-model guards --------------------------------------------------------------------------
def test_redefining_final_answer_does_not_break_the_run():
    src = "def final_answer(x):\n    print(x)\nfinal_answer(5)"
    result = make_agent([code(src)]).run("t")
    assert result.status == "success" and result.answer == 5
    assert "final_answer is provided" in result.trajectory.steps[0].meta["blocks"][0]["notes"][0]


def test_made_up_data_does_not_replace_an_injected_variable(sales):
    src = "import pandas as pd\nsales = pd.DataFrame({'units': [100]})\nfinal_answer(int(sales.units.sum()))"
    agent = make_agent([code(src)])
    agent.runtime.inject("sales", sales)
    result = agent.run("t")
    assert result.answer == 10
    assert agent.runtime.retrieve("sales") is sales
    assert "`sales` was given to you" in result.trajectory.steps[0].meta["blocks"][0]["notes"][0]


def test_guard_notes_are_shown_after_the_output():
    agent = make_agent([code("import pandas as pd\ndf = pd.read_csv('x.csv')\nprint('ok')"), "done"])
    agent.runtime.inject("df", pd.DataFrame({"a": [1]}))
    obs = agent.run("t").trajectory.steps[0].observation
    assert obs.startswith("Observation:\nok\nNote: `df` was given to you")


def test_loc_zero_on_a_sorted_frame_picks_the_top_row():
    sales = pd.DataFrame({"region": ["north", "south", "east"], "total": [5, 9, 7]})
    src = "top = sales.sort_values('total', ascending=False)\nfinal_answer(top.loc[0, 'region'])"
    agent = make_agent([code(src)])
    agent.runtime.inject("sales", sales)
    result = agent.run("Which region sold most?")
    assert result.answer == "south"  # .loc[0] would have been "north", the first row before sorting
    assert "it ran as `.iloc[0]`" in result.trajectory.steps[0].observation


def test_an_inplace_fill_of_a_selected_column_fills_the_frame():
    # DABench 111: df['LoanAmount'].fillna(median, inplace=True) changes a copy under pandas 3's copy-on-write;
    # the std of the unfilled column was sent as `success`
    loans = pd.DataFrame({"amount": [1.0, None, 3.0, None, 10.0]})
    src = "loans['amount'].fillna(loans['amount'].median(), inplace=True)\nfinal_answer(int(loans['amount'].isna().sum()))"
    agent = make_agent([code(src)])
    agent.runtime.inject("loans", loans)
    result = agent.run("Fill the missing amounts with the median. How many are missing then?")
    assert result.answer == 0 and agent.runtime.retrieve("loans")["amount"].tolist() == [1.0, 3.0, 3.0, 3.0, 10.0]
    seen = result.trajectory.steps[0].observation
    assert "ran as `loans['amount'] = loans['amount'].fillna(loans['amount'].median())`" in seen
    assert "ChainedAssignmentError" not in seen


def test_column_names_written_without_their_end_spaces_run_with_them():
    # DABench 587-593: 'avg. wait time ' written as 'avg. wait time', one KeyError per column until max_steps
    calls = pd.DataFrame({"avg. wait time ": [1.0, 3.0], " agents": [2, 4]})
    src = "final_answer(float(calls['avg. wait time'].mean() + calls[['agents']].sum().iloc[0]))"
    agent = make_agent([code(src)])
    agent.runtime.inject("calls", calls)
    result = agent.run("Mean wait plus the number of agents.")
    assert result.answer == 8.0
    assert "'avg. wait time' as 'avg. wait time '" in result.trajectory.steps[0].observation
    # the model stripped the names itself: its names are the real ones from then on
    stripped = "calls.columns = calls.columns.str.strip()\nprint(calls['avg. wait time'].mean())"
    agent = make_agent([code(stripped), code("final_answer(float(calls['agents'].sum()))")])
    agent.runtime.inject("calls", calls.copy())
    result = agent.run("Number of agents.")
    assert result.answer == 6.0 and "ran with them" not in str([s.observation for s in result.trajectory.steps])


def test_column_names_held_in_a_variable_the_code_selects_by_run_with_their_end_spaces():
    # DABench 590: features = ['num. calls abandoned', ...]; df[features], one KeyError per step to max_steps
    calls = pd.DataFrame({"num. calls abandoned ": [1, 3], "avg. num. agents staffed ": [2, 4], "answered": [5, 6]})
    src = (
        "features = ['num. calls abandoned', 'answered']\ntarget = 'avg. num. agents staffed'\n"
        "final_answer(int(calls[features].sum().sum() + calls[target].sum()))"
    )
    agent = make_agent([code(src)])
    agent.runtime.inject("calls", calls)
    result = agent.run("Sum them.")
    assert result.answer == 21, result.trajectory.steps[0].observation
    assert "'num. calls abandoned' as 'num. calls abandoned '" in result.trajectory.steps[0].observation


def test_column_names_written_with_other_separators_run_as_the_tables_in_a_kernel():
    """DABench 361: `df['wind_speed']` for 'wind speed', three KeyErrors in a row despite the "Did you mean". In a
    kernel (the host keeps the table as given), a column the code made under the snake_case name stays its own."""
    from cave.runtimes.kernel import KernelRuntime

    weather = pd.DataFrame({"time": ["a", "b", "c"], "wind speed": [2.0, 4.0, 6.0]})
    made = code("weather['wind_speed'] = weather['wind speed'] * 10\nprint(weather['wind_speed'].max())")
    with KernelRuntime(timeout=30) as rt:
        rt.inject("weather", weather)
        mean = code("final_answer(float(weather['wind_speed'].mean()))")
        result = Agent(model=Scripted([mean]), runtime=rt).run("Mean wind?")
        assert result.answer == 4.0
        assert "'wind_speed' as 'wind speed'" in result.trajectory.steps[0].observation
        own = Agent(model=Scripted([made, mean]), runtime=rt).run("Ten times the mean wind?")
        assert own.answer == 40.0 and "other separators" not in str([s.observation for s in own.trajectory.steps])


class RecordingScripted(Scripted):
    """Scripted that also records the sampling arguments of each call."""

    def __init__(self, *a: Any, **kw: Any) -> None:
        super().__init__(*a, **kw)
        self.kwargs: list[dict[str, Any]] = []

    async def stream(self, messages, **kwargs):
        self.kwargs.append(kwargs)
        async for item in super().stream(messages, **kwargs):
            yield item


def test_repeating_failed_code_is_resampled_once_at_a_higher_temperature():
    bad = code("x = undefined_name")
    llm = RecordingScripted([bad, bad, code("final_answer('fixed')")])
    result = make_agent(llm, seed=1).run("t")
    assert result.status == "success" and result.answer == "fixed"
    steps = result.trajectory.steps
    assert len(steps) == 2
    assert steps[1].meta["resampled"][0]["discarded"] == bad
    assert steps[1].meta["llm_calls"] == 2
    assert [k["temperature"] for k in llm.kwargs] == [0.0, 0.0, 0.7]
    assert steps[1].usage == llm_usage_of(llm, [1, 2])


def test_a_working_cell_run_twice_is_not_run_a_third_time_but_sampled_again():
    look = code("x = 6 * 7\nprint(x)")
    llm = RecordingScripted([look, look, look, code("final_answer(x)")])
    result = make_agent(llm, seed=1).run("t")
    assert result.status == "success" and result.answer == 42
    steps = result.trajectory.steps
    assert len(steps) == 3 and "exactly the same code" in steps[1].observation
    assert steps[2].meta["resampled"][0]["discarded"] == look and "folded" not in steps[2].meta
    assert [k["temperature"] for k in llm.kwargs] == [0.0, 0.0, 0.0, 0.7]


def llm_usage_of(llm: Scripted, call_indices: list[int]) -> Usage:
    total = Usage()
    for i in call_indices:
        prompt = sum(llm.count_tokens(str(m.get("content") or "")) for m in llm.calls[i])
        reply = llm.replies[i]
        completion = llm.count_tokens(reply) if reply else 0
        total = total + Usage(prompt, completion, prompt + completion)
    return total


# -- length recovery -----------------------------------------------------------------------------
def test_reply_cut_inside_a_code_block_is_continued():
    cut = Completion("Sum them.\n```python\nvalues = [1, 2,", Usage(50, 10, 60), finish_reason="length")
    rest = Completion("```python\n 3]\nfinal_answer(sum(values))\n```", Usage(70, 8, 78), finish_reason="stop")
    llm = Scripted([cut, rest])
    result = make_agent(llm).run("t")
    assert result.status == "success" and result.answer == 6
    step = result.trajectory.steps[0]
    assert step.meta["continuations"] == 1
    assert step.usage == Usage(120, 18, 138)
    assert llm.calls[1][-2] == {"role": "assistant", "content": cut.text}
    assert llm.calls[1][-1]["content"] == prompts.CONTINUE_PROMPT
    assert step.code == "values = [1, 2, 3]\nfinal_answer(sum(values))"


def test_length_cut_outside_code_is_not_continued():
    cut = Completion("```python\nx = 1\n```\nAnd now I will expla", Usage(5, 5, 10), finish_reason="length")
    llm = Scripted([cut, code("final_answer(x)")])
    result = make_agent(llm).run("t")
    assert result.answer == 1 and len(llm.calls) == 2
    assert "continuations" not in result.trajectory.steps[0].meta


def test_stop_sequence_that_ate_the_closing_fence_is_repaired():
    llm = Scripted([Completion("ok\n```python\nfinal_answer(3)", Usage(1, 1, 2), finish_reason="stop")])
    result = make_agent(llm, stop=["\n```\n"]).run("t")
    assert result.answer == 3
    assert result.trajectory.steps[0].completion.endswith("\n```")


# -- compaction ----------------------------------------------------------------------------------
def test_compaction_elides_old_observations_first():
    # Each observation is ~750 tokens; the window allows ~2350 prompt tokens before compaction.
    replies = [code(f"print('{c}' * 3000)") for c in "abc"] + [code("final_answer('ok')")]
    llm = Scripted(replies, context_window=3000)
    agent = make_agent(llm, max_tokens=200, keep_recent=1, observation_limit=3500)
    events = asyncio.run(collect(agent, "print things"))
    compactions = [e for e in events if isinstance(e, Compacted)]
    assert [c.how for c in compactions] == ["elide"]
    assert compactions[0].tokens_after < compactions[0].tokens_before
    assert events[-1].trajectory.status == "success"
    last_prompt = [m["content"] for m in llm.calls[3]]
    # The old observations are replaced by a marker (never silently dropped); the latest stays verbatim.
    assert sum("[elided to save context; it was" in c for c in last_prompt) == 2
    assert any(c.startswith("Observation:\nccc") for c in last_prompt)
    assert agent.prompt_tokens(llm.calls[3]) < 3000 * agent.compact_at - 200


def test_compaction_summarizes_when_eliding_is_not_enough():
    # Long replies (~600 tokens each) and short observations: eliding cannot help, a summary must.
    prose = "Let me think about this carefully. " * 70
    replies = [code(f"v{i} = {i}", prose=prose) for i in range(3)]
    replies += ["Summary: v0, v1 and v2 hold 0, 1 and 2.", code("final_answer(v0 + v1 + v2)")]
    llm = Scripted(replies, context_window=2000)
    agent = make_agent(llm, max_tokens=100, keep_recent=1)
    events = asyncio.run(collect(agent, "make three variables"))
    traj = events[-1].trajectory
    assert traj.status == "success" and traj.final_answer == 3
    assert [s.kind for s in traj.steps] == ["action", "action", "action", "compaction", "action"]
    summary = [e for e in events if isinstance(e, Compacted) and e.how == "summary"]
    assert len(summary) == 1 and summary[0].tokens_after < summary[0].tokens_before
    assert llm.calls[3][-1]["content"] == prompts.SUMMARY_PROMPT  # the summarizing call
    final_prompt = llm.calls[4]
    assert final_prompt[1]["content"].startswith("make three variables\n\nProgress so far")
    assert "Summary: v0, v1 and v2" in final_prompt[1]["content"]
    assert [m["role"] for m in final_prompt] == ["system", "user", "assistant", "user"]
    assert agent.prompt_tokens(final_prompt) <= 2000 * agent.compact_at - 100
    # The summarizing call is a step of its own, counted in the totals.
    assert traj.usage == llm_usage_of(llm, [0, 1, 2, 3, 4])
    assert traj.steps[3].completion == "Summary: v0, v1 and v2 hold 0, 1 and 2."


def test_compaction_elides_observations_that_follow_a_state_note():
    """The stable layout puts the runtime's state note before each observation; those are old outputs too.
    (DABench 144: nothing was elided and the sixth call's prompt went past the window.)"""
    replies = [code(f"v{c} = 1\nprint('{c}' * 3000)") for c in "abc"] + [code("final_answer('ok')")]
    llm = Scripted(replies, context_window=3000)
    agent = make_agent(llm, max_tokens=200, keep_recent=1, observation_limit=3500, prompt_layout="stable")
    events = asyncio.run(collect(agent, "print things"))
    assert events[-1].trajectory.status == "success"
    assert [c.how for c in events if isinstance(c, Compacted)] == ["elide"]
    stubs = [c for c in (m["content"] for m in llm.calls[3]) if "[elided to save context; it was" in c]
    assert len(stubs) == 2
    assert all(agent.prompt_tokens(call) + 200 <= 3000 for call in llm.calls)


def test_a_prompt_always_leaves_room_for_a_reply():
    """Replies too long to summarize whole (a cell of literal data, DABench 140): the summarizing call gets the
    middle cut down to fit, and the next prompt is shortened until a full reply fits; no call goes past the window."""
    data = "rows = [" + ", ".join(str(i) for i in range(2500)) + "]"  # ~3,400 tokens of literal data
    replies = [code(data), code(data), "Summary: rows was built twice.", code("final_answer(len(rows))")]
    llm = Scripted(replies, context_window=4096)
    agent = make_agent(llm, max_tokens=512, keep_recent=1)
    events = asyncio.run(collect(agent, "count the rows"))
    traj = events[-1].trajectory
    assert traj.status == "success" and traj.final_answer == 2500, traj.error
    assert "compaction" in [s.kind for s in traj.steps]
    for call in llm.calls:
        room = SUMMARY_ROOM if call[-1]["content"] == prompts.SUMMARY_PROMPT else 512
        assert agent.prompt_tokens(call) + room <= 4096
    assert any("characters cut to fit the context window" in str(m["content"]) for m in llm.calls[-1])


@pytest.mark.timeout(60)
def test_fitting_a_prompt_ends_when_halving_no_longer_shortens():
    """Many mid-sized observations in a small window: halving stops shortening a message near KEEP_AT_LEAST (the
    cut's marker costs what it saves), and the fit used to loop there for ever (a DABench run hung at max_steps).
    Now the oldest messages become stubs and the summarizing call at the limit still fits."""
    replies = [code(f"print('{c}' * 700)\nv{c} = 1") for c in "abcdefghij"] * 2
    llm = Scripted(replies, context_window=1000)
    agent = make_agent(llm, max_tokens=300, keep_recent=4, max_steps=10, prompt_layout="stable")
    events = asyncio.run(collect(agent, "print things"))
    traj = events[-1].trajectory
    assert traj.status == "max_steps", traj.error
    assert all(agent.prompt_tokens(call) + 128 <= 1000 for call in llm.calls)
    assert any("characters cut to fit the context window]" in str(m["content"]) for m in llm.calls[-1])


# -- token accounting ----------------------------------------------------------------------------
class NonStreaming(LLM):
    """A backend that cannot stream (implements only _complete), replaying the same replies."""

    def __init__(self, replies: list[str]) -> None:
        self.inner = Scripted(replies)

    async def _complete(self, messages, **kwargs):
        return await self.inner.complete(messages, **kwargs)


REPLIES = [code("x = 2"), code("1 / 0"), code("y = x * 21"), code("final_answer(y)")]


@pytest.mark.parametrize("stream", [True, False])
def test_usage_totals_are_the_sum_of_the_calls(stream):
    llm = Scripted(list(REPLIES))
    result = make_agent(llm, stream=stream).run("compute")
    assert result.answer == 42
    assert result.usage == llm_usage_of(llm, [0, 1, 2, 3])
    assert [s.usage for s in result.trajectory.steps] == [llm_usage_of(llm, [i]) for i in range(4)]


def test_usage_is_identical_streaming_and_not():
    runs = []
    for stream, llm in [
        (True, Scripted(list(REPLIES))),
        (False, Scripted(list(REPLIES))),
        (True, NonStreaming(list(REPLIES))),
    ]:
        result = make_agent(llm, stream=stream).run("compute")
        runs.append(
            ([s.usage for s in result.trajectory.steps], result.usage, [s.completion for s in result.trajectory.steps])
        )
    assert runs[0] == runs[1] == runs[2]
    assert runs[0][1].total_tokens > 0


# -- events --------------------------------------------------------------------------------------
def test_events_stream_in_order():
    llm = Scripted([code("a = 1\nprint(a)"), code("final_answer(a)")])
    events = asyncio.run(collect(make_agent(llm), "t"))
    assert isinstance(events[0], RunStarted) and isinstance(events[-1], RunFinished)
    kinds = [type(e).__name__ for e in events if not isinstance(e, TextChunk)]
    assert kinds == [
        "RunStarted",
        "StepStarted",
        "CodeStarted",
        "Observation",
        "StepFinished",
        "StepStarted",
        "CodeStarted",
        "Observation",
        "StepFinished",
        "RunFinished",
    ]
    steps = [e.step for e in events if isinstance(e, StepFinished)]
    for step in steps:
        streamed = "".join(e.text for e in events if isinstance(e, TextChunk) and e.index == step.index)
        assert streamed == step.completion
    assert [e.index for e in events if isinstance(e, StepStarted)] == [0, 1]
    obs = [e for e in events if isinstance(e, Observation)]
    assert obs[0].text == "1" and obs[1].final is True
    assert [e.code for e in events if isinstance(e, CodeStarted)] == ["a = 1\nprint(a)", "final_answer(a)"]


def test_arun_inside_an_event_loop_and_run_refuses_there():
    async def main() -> tuple[Any, str]:
        agent = make_agent([code("final_answer('async')")])
        result = await agent.arun("t")
        with pytest.raises(RuntimeError, match="arun"):
            agent.run("t")
        return result.answer, result.status

    assert asyncio.run(main()) == ("async", "success")


# -- skills hook ---------------------------------------------------------------------------------
class FakeSkills:
    def __init__(self) -> None:
        self.installed = 0

    def prompt_section(self) -> str:
        return "## Skills\n- tidy-data: how to tidy a table"

    def install(self, runtime: Any) -> None:
        self.installed += 1

        def activate_skill(name: str) -> str:
            """Load a skill's instructions."""
            return f"instructions for {name}"

        runtime.inject_function(activate_skill)


def test_skills_are_installed_once_and_listed_in_the_prompt():
    skills = FakeSkills()
    llm = Scripted([code("text = activate_skill('tidy-data')\nfinal_answer(text)"), code("final_answer(2)")])
    agent = make_agent(llm, skills=skills)
    assert agent.run("t").answer == "instructions for tidy-data"
    agent.run("again")
    assert skills.installed == 1
    assert "## Skills\n- tidy-data" in llm.calls[0][0]["content"]
    assert "activate_skill(name: str) -> str" in llm.calls[0][0]["content"]


# -- the kernel runtime (the final_answer signal crosses a process boundary) ---------------------
def test_final_answer_through_the_kernel_runtime(sales):
    kernel = pytest.importorskip("cave.runtimes.kernel")
    pytest.importorskip("jupyter_client")
    runtime = kernel.KernelRuntime()
    try:
        agent = Agent(
            model=Scripted([code("try:\n    final_answer(sales[sales.units > 1])\nexcept Exception:\n    pass")]),
            runtime=runtime,
        )
        runtime.inject("sales", sales)
        result = agent.run("rows with more than one unit")
        assert result.status == "success"
        pd.testing.assert_frame_equal(result.answer, sales[sales.units > 1])
    finally:
        runtime.close()
