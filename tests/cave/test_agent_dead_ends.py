"""No dead ends: prose that cannot be the answer, cells cut off at the length limit, loops on the same error,
given objects loaded again, declared outputs, and the review of an answer before it is accepted.

Driven by the Scripted backend against a real InProcessRuntime (and a real SQLite database where SQL is involved).
"""

from __future__ import annotations

import functools

import pandas as pd
import pytest
import sqlalchemy
from cave.runtimes.inprocess import InProcessRuntime

from cave import prompts
from cave.agent import Agent as _Agent
from cave.llm.base import Completion, Scripted, Usage

# These tests are about the holds an answer goes through; verification by agreement is tested in
# test_verify.py. Here the caller verifies (verify=None), so an accepted answer ends `success` as a role's turn does.
Agent = functools.partial(_Agent, verify=None)


def code(src: str, prose: str = "I will do it.") -> str:
    return f"{prose}\n```python\n{src}\n```"


@pytest.fixture
def sales() -> pd.DataFrame:
    return pd.DataFrame({"region": ["N", "S", "N", "E"], "units": [1, 2, 3, 4]})


def agent_with(replies: list, sales: pd.DataFrame | None = None, **kw) -> Agent:
    agent = Agent(model=Scripted(replies, repeat_last=True), runtime=InProcessRuntime(), **kw)
    if sales is not None:
        agent.runtime.inject("sales", sales)
    return agent


# -- prose that cannot be the answer -----------------------------------------------------------------
def test_prose_right_after_a_failed_cell_is_not_the_answer(sales):
    replies = [code("sales.groupby('country').units.sum()"), "The answer is 42.", code("final_answer(10)")]
    result = agent_with(replies, sales).run("total units")
    assert result.status == "success" and result.answer == 10
    refused = result.trajectory.steps[1]
    assert "your last code failed" in refused.observation


def test_prose_before_looking_at_the_data_is_not_the_answer(sales):
    result = agent_with(["The top region is N.", code("final_answer(sales.units.sum())")], sales).run("units?")
    assert result.status == "success" and result.answer == 10
    assert "you have not looked at the data" in result.trajectory.steps[0].observation


def test_prose_after_a_successful_cell_is_still_an_answer(sales):
    result = agent_with([code("print(sales.units.sum())"), "The total is 10."], sales).run("units?")
    assert result.status == "no_code" and result.answer == "The total is 10."


def test_refused_prose_said_again_is_sampled_again_inside_a_code_block(sales):
    # a development attempt: it printed the share, stated it in words, was told to pass its variable, stated it
    # again word for word, and twice more when sampled hotter: the retry now starts inside a code block
    words = "The total is 10 units."
    replies = [code("total = sales.units.sum()\nprint(total)"), words, words, "final_answer(total)\n```"]
    model = Scripted(replies)
    agent = _Agent(model=model, runtime=InProcessRuntime(), verify=0, retry_temperature=0.7)
    agent.runtime.inject("sales", sales)
    result = agent.run("How many units were sold?")
    assert result.answer == 10 and result.status == "unverified"  # from code (verification off: not confirmed)
    assert model.prefixes == ["", "", "", "```python\n"]
    assert result.trajectory.steps[2].meta["resampled"] == [
        {"temperature": 0.7, "discarded": words, "prefix": "```python\n"}
    ]

    # a backend that takes no response prefix is sampled hotter, as before
    class NoPrefix(Scripted):
        supports_prefix = False

    model = NoPrefix([*replies[:3], code("final_answer(total)")])
    agent = _Agent(model=model, runtime=InProcessRuntime(), verify=0, retry_temperature=0.7)
    agent.runtime.inject("sales", sales)
    assert agent.run("How many units were sold?").answer == 10 and model.prefixes == ["", "", "", ""]


def test_prose_in_other_words_after_a_refusal_is_sampled_inside_a_code_block_when_prose_cannot_answer(sales):
    # a development task with checks: the Series built, then three prose replies in other words, each refused with
    # the call to run, until max_steps; where the task checks objects no prose can end the run
    replies = [code("total = int(sales.units.sum())"), "The total is computed.", "The answer is the total.",
               "final_answer(total)\n```"]  # fmt: skip
    model = Scripted(replies)
    agent = _Agent(model=model, runtime=InProcessRuntime(), verify=0, retry_temperature=0.7,
                   checks={"answer": {"type": "int"}})  # fmt: skip
    agent.runtime.inject("sales", sales)
    result = agent.run("How many units were sold?")
    assert result.status == "success" and result.answer == 10
    assert model.prefixes == ["", "", "", "```python\n"]


def test_a_working_cell_run_a_third_time_is_sampled_again_at_the_answer_call(sales):
    # a development run: a cell that printed the answer ran six times, the note after the repeat (run
    # final_answer(name)) ignored, the same cell sampled hotter twice a step: the retry now starts at the call
    cell = code("top = sales.groupby('region').units.sum().idxmax()\nprint(top)", "The answer is 'E'.")
    model = Scripted([cell, cell, cell, "top)\n```"])
    agent = _Agent(model=model, runtime=InProcessRuntime(), verify=0, retry_temperature=0.7)
    agent.runtime.inject("sales", sales)
    result = agent.run("Which region sold the most units?")
    assert result.answer == "E" and result.status == "unverified"  # from code (verification off: not confirmed)
    assert "final_answer(top)" in result.trajectory.steps[1].observation  # the note the third run ignored
    assert model.prefixes == ["", "", "", "```python\nfinal_answer("]
    assert result.trajectory.steps[2].meta["resampled"] == [
        {"temperature": 0.7, "discarded": cell, "prefix": "```python\nfinal_answer("}
    ]
    assert result.trajectory.steps[2].code == "final_answer(top)"

    # a cell the runtime noted (a conversion made most values missing) is no answer as it is: the note after the
    # repeat says to act on the Note, and the retry is not started at the call (a dev run answered such a table)
    days = pd.DataFrame({"day": ["2025-01-01", "Jan 2 2025", "03 Jan 2025", "4 January 2025"]})
    noted = code("import pandas as pd\nd = pd.to_datetime(days['day'], errors='coerce')\nn = d.notna().sum()\nprint(n)")
    model = Scripted([noted, noted, noted, code("final_answer(int(n))")])
    agent = _Agent(model=model, runtime=InProcessRuntime(), verify=0, retry_temperature=0.7)
    agent.runtime.inject("days", days)
    result = agent.run("How many days are there?")
    assert set(model.prefixes) == {""}
    assert "got the same Note about what it computed" in result.trajectory.steps[1].observation
    # with the whole cell to run, the Note's line in place (a development run ran such a cell five times)
    fixed = "d = pd.to_datetime(days['day'], format='mixed', errors='coerce')"
    assert f"Your cell with the Note's line in place:\n```python\nimport pandas as pd\n{fixed}\n" in (
        result.trajectory.steps[1].observation
    )

    # a cell that only looks (no result assigned) is sampled hotter, without the call
    look = code("print(sales.head())")
    model = Scripted([look, look, look, code("final_answer(int(sales.units.sum()))")])
    agent = _Agent(model=model, runtime=InProcessRuntime(), verify=0, retry_temperature=0.7)
    agent.runtime.inject("sales", sales)
    assert agent.run("How many units were sold?").answer == 10 and model.prefixes == ["", "", "", ""]


def test_a_model_that_never_writes_code_ends_after_two_refusals(sales):
    result = agent_with(["N.", "Still N.", "N, really."], sales, max_steps=6).run("top region?")
    assert result.status == "no_code" and result.answer == "N, really."
    assert len(result.trajectory.steps) == 3


def test_a_reply_that_is_python_without_fences_is_run_as_code(sales):
    # the 1.5B answered `final_answer(max_visits_month)` on a line of its own: that is the call, not the answer
    replies = [code("total = int(sales.units.sum())\nprint(total)"), "final_answer(total)"]
    result = agent_with(replies, sales).run("total units")
    assert result.status == "success" and result.answer == 10


def test_prose_without_given_data_is_an_answer():
    result = agent_with(["Hello! Nothing to compute."]).run("say hello")
    assert result.status == "no_code"


# -- cut off at the length limit ---------------------------------------------------------------------
def test_a_cell_cut_off_at_max_tokens_is_reported_and_not_run(sales):
    def cut(text: str) -> Completion:
        return Completion(text=text, usage=Usage(10, 20, 30), finish_reason="length")

    # The reply and both continuations run out of tokens inside the same block of typed-in data.
    replies = [cut("Let me type the data.\n```python\ndata = pd.DataFrame({'a': [1, 2, 3,"), cut(" 4, 5,"), cut(" 6,")]
    agent = agent_with([*replies, code("final_answer(int(sales.units.sum()))")], sales, max_continuations=2)
    result = agent.run("units?")
    assert result.status == "success" and result.answer == 10
    first = result.trajectory.steps[0]
    assert first.meta["cut_off"] and first.execution is None
    assert "cut off at the length limit" in first.observation
    assert "data typed in by hand" in first.observation


def test_a_reply_cut_off_before_is_sampled_again_not_taken_again(sales):
    # a development task: the given table typed in, cut off, a prose reply, then the same cut reply word for word,
    # four times until max_steps; the repeat is sampled again at retry_temperature instead
    typed = Completion(text="```python\norders = pd.DataFrame({'a': [1, 2, 3,", usage=Usage(10, 20, 30),
                       finish_reason="length")  # fmt: skip
    llm = Scripted([typed, "I built the table.", typed, code("final_answer(int(sales.units.sum()))")])
    agent = Agent(model=llm, runtime=InProcessRuntime(), max_continuations=0)
    agent.runtime.inject("sales", sales)
    result = agent.run("units?")
    assert result.status == "success" and result.answer == 10
    again = result.trajectory.steps[2]
    assert again.meta["resampled"][0]["discarded"] == typed.text and not again.meta.get("cut_off")


def test_a_reply_cut_off_in_a_loop_is_not_continued_and_its_restart_is_sampled_again(sales):
    # DABench 224: after a review note, the note's sentences written as comments again and again, each reply
    # continued to ~1,800 tokens (300 s) and the next step starting the same way, four steps in a row
    loop = "```python\n" + "# Check the target column and the labels to ensure they are correctly labeled.\n" * 30
    cut = Completion(text=loop, usage=Usage(10, 20, 30), finish_reason="length")
    llm = Scripted([cut, cut, code("final_answer(int(sales.units.sum()))")])
    agent = Agent(model=llm, runtime=InProcessRuntime(), max_continuations=2)
    agent.runtime.inject("sales", sales)
    result = agent.run("units?")
    first, second = result.trajectory.steps[:2]
    assert first.meta["cut_off"] and not first.meta.get("continuations")  # a loop is not continued
    assert llm.calls[1][-1]["content"] != prompts.CONTINUE_PROMPT
    assert second.meta["resampled"][0]["discarded"].startswith(loop[:300])  # the same loop again: sampled again
    assert result.status == "success" and result.answer == 10


def test_a_given_table_typed_in_that_does_not_parse_is_named(sales):
    # a development attempt: a given table typed in, the continuation of the cut reply went on with the analysis
    # in the middle of the list, so the cell ran as a SyntaxError that named nothing; the note names the table
    typed = code("sales = pd.DataFrame({'region': ['N', 'S', 'N',# the total\nprint(sales.units.sum())")
    result = agent_with([typed, code("final_answer(int(sales.units.sum()))")], sales).run("units?")
    first = result.trajectory.steps[0].observation
    assert "SyntaxError" in first and "`sales` was given to you ready to use" in first
    assert result.status == "success" and result.answer == 10


def test_a_continuation_that_would_overflow_the_context_window_is_not_asked_for(sales):
    # a small window (a 1.5B at n_ctx=4096): continuing a long cut cell would overflow it, which ended the run
    # with an LLMError; the cell stays cut off instead, and the run goes on
    long_cell = "Let me type the data.\n```python\ndata = pd.DataFrame({'a': [" + "1, " * 1200
    replies = [Completion(text=long_cell, usage=Usage(10, 20, 30), finish_reason="length"),
               code("final_answer(int(sales.units.sum()))")]  # fmt: skip
    llm = Scripted(replies, context_window=1200)
    agent = Agent(model=llm, runtime=InProcessRuntime(), max_tokens=256, max_continuations=2)
    agent.runtime.inject("sales", sales)
    result = agent.run("units?")
    assert result.status == "success" and result.answer == 10
    first = result.trajectory.steps[0]
    assert first.meta["cut_off"] and len(llm.calls) == 2  # the cut reply and the next step: no continuation
    assert "cut off at the length limit" in first.observation


def test_nothing_right_after_a_failed_cell_is_sent_back_to_the_error(sales):
    # The 1.5B, asked in a session for a table its code failed to build, answered final_answer(None) and confirmed
    # it. Nothing after a failure is giving up: once, it goes back to the error; the same nothing again stands,
    # but not as a success.
    replies = [
        code("by_region = sales.groupby('region').units.sum().reset_index()"),
        code("monthly = by_region.groupby(by_region['month']).units.sum()"),
        code("final_answer(None)"),
        code("final_answer(sales.groupby('region').units.sum().to_dict())"),
    ]
    result = agent_with(replies, sales).run("units per region")
    assert result.status == "success" and result.answer == {"E": 4, "N": 4, "S": 2}
    held = result.trajectory.steps[2].observation
    assert "final_answer(None) is not an answer" in held and "KeyError: 'month'" in held
    again = agent_with([*replies[:3], code("final_answer(None)")], sales).run("units per region")
    assert again.status == "failed_checks" and len(again.trajectory.steps) == 4  # held once, then it stands


def test_a_missing_column_names_the_table_that_has_it(sales):
    replies = [
        code("by_region = sales.groupby('region').units.sum().reset_index()"),
        code("x = by_region['units_sold'].sum()"),
        code("y = by_region.groupby(by_region['units'] > 1).region.count()\nz = by_region['region_code']"),
        code("final_answer(1)"),
    ]
    sales = sales.assign(units_sold=sales.units)
    result = agent_with(replies, sales).run("total units")
    first, second = result.trajectory.steps[1:3]
    assert "'units_sold' is a column of sales." in first.observation
    assert "is a column of" not in second.observation  # no table has region_code: nothing to point at


def test_a_bare_cell_with_its_language_tag_runs_without_the_tag(sales):
    # "python\nfinal_answer(x)": the fence's backticks forgotten, its language tag kept (NameError: python)
    result = agent_with(["python\nfinal_answer(int(sales.units.sum()))"], sales).run("total units")
    assert result.status == "success" and result.answer == 10


# -- loops -----------------------------------------------------------------------------------------------
def test_the_same_error_twice_points_at_the_line_and_the_real_columns(sales):
    replies = [
        code("x = sales.groupby('country').units.sum()"),
        code("y = 1\nx = sales.groupby('country').units.sum()\nprint(x)"),
        code("final_answer(sales.groupby('region').units.sum().to_dict())"),
    ]
    result = agent_with(replies, sales).run("units per country")
    assert result.status == "success"
    first, second = result.trajectory.steps[:2]
    assert "same error" not in first.observation
    # a missing column the first time: what the frame on that line really has, before any loop
    assert "really are: sales: pandas.DataFrame" in first.observation and "units: int64" in first.observation
    note = second.observation
    assert "same error as in your previous 1 steps" in note
    assert "`x = sales.groupby('country').units.sum()`" in note  # the failing line (line 2 of the cell)
    assert "region: " in note and "units: int64" in note  # the frame's real columns


def test_a_column_name_retyped_after_did_you_mean_gets_the_failing_line_fixed(sales):
    # DABench 587: the 1.5B wrote the task's words ('avg. waiting time') five times after "Did you mean".
    bad = "sales['unit'] = sales['unit'] * 2"
    replies = [code(bad), code(f"y = 0\n{bad}"), code("final_answer(1)")]
    result = agent_with(replies, sales).run("double the units")
    note = result.trajectory.steps[1].observation
    assert "same error" in note
    assert "```python\nsales['unit'] = sales['units'] * 2\n```" in note  # the read fixed, its own name kept


def test_a_misspelt_name_in_a_list_of_columns_gets_the_failing_line_fixed():
    # DABench 275: df[['MEANGJZH', 'TOTUSJZ']] for seven steps; two columns are close ('MEANJZH', 'MEANJZD'), so
    # nothing renames it; the repeat's note gives the line with the closest one.
    frame = pd.DataFrame({"MEANJZH": [1.0, 2.0], "MEANJZD": [3.0, 4.0], "TOTUSJZ": [5.0, 6.0]})
    bad = "X = frame[['MEANGJZH', 'TOTUSJZ']]"
    agent = Agent(
        model=Scripted([code(bad), code(f"y = 0\n{bad}"), code("final_answer(1)")]), runtime=InProcessRuntime()
    )
    agent.runtime.inject("frame", frame)
    note = agent.run("fit on MEANJZH and TOTUSJZ").trajectory.steps[1].observation
    assert "same error" in note
    assert "```python\nX = frame[['MEANJZH', 'TOTUSJZ']]\n```" in note


def test_a_cell_that_only_shows_typed_numbers_is_told_it_computes_nothing(sales):
    # DABench 300: after a nan, the 1.5B ran the dict it had typed four times, told each time "if that answers the
    # task, call final_answer": the run ended at max_steps
    typed = code("{'mean_units': 2.50, 'n': 3}")
    result = agent_with([typed, typed, code("final_answer(sales.units.mean())")], sales).run("mean units?")
    first, second = result.trajectory.steps[:2]
    assert "only shows values you typed" in first.observation and first.meta["typed_display"]
    assert (
        "exactly the same code" in second.observation and "call final_answer with the result" not in second.observation
    )
    shown = agent_with([code("m = sales.units.mean()\n{'m': m}"), code("final_answer(1)")], sales).run("t")
    assert "only shows values" not in shown.trajectory.steps[0].observation  # it shows what it computed


def test_a_column_the_task_asks_to_make_is_named_as_such_when_the_code_reads_it_unmade():
    # DABench 423: df['Volatility'] read five times; the task defines Volatility = (High - Low) / Open
    prices = pd.DataFrame(
        {"High": [2.0, 3.0, 5.0], "Low": [1.0, 1.0, 2.0], "Open": [1.5, 2.0, 4.0], "Volume": [1, 2, 4]}
    )
    task = "Create a new feature 'Volatility' = (High - Low) / Open. What is its correlation with Volume?"
    bad = "r = prices['Volatility'].corr(prices['Volume'])"
    agent = Agent(
        model=Scripted([code(bad), code(f"y = 0\n{bad}"), code("final_answer(1)")]), runtime=InProcessRuntime()
    )
    agent.runtime.inject("prices", prices)
    first, second = agent.run(task).trajectory.steps[:2]
    for step in (first, second):
        assert "'Volatility' is no column yet" in step.observation
        assert "(\"Create a new feature 'Volatility' = (High - Low) / Open.\")" in step.observation
        assert "prices['Volatility'] = ..." in step.observation


def test_a_file_read_that_finds_no_file_is_told_the_given_table_is_the_data(sales, tmp_path, monkeypatch):
    # DABench 492: df_2010 = pd.read_csv('<the task's table>.csv') beside the given df; FileNotFoundError, then
    # "the file does not exist" in prose ended the run
    monkeypatch.chdir(tmp_path)
    read = code("import pandas as pd\nrecent = pd.read_csv('sales_2024.csv')")
    result = agent_with([read, code("final_answer(len(sales))")], sales).run("rows of sales_2024.csv?")
    note = result.trajectory.steps[0].observation
    assert "FileNotFoundError" in note
    assert (
        "the data was given to you already loaded, as sales. Use it in place of the file: recent = sales.copy()" in note
    )


def test_repeated_failing_code_is_resampled_hotter_when_the_first_resample_repeats_it(sales):
    bad = code("sales.groupby('country')")
    llm = Scripted([bad, bad, bad, code("final_answer(1)")])
    agent = Agent(model=llm, runtime=InProcessRuntime(), seed=0)
    agent.runtime.inject("sales", sales)
    result = agent.run("t")
    assert result.answer == 1
    temps = [r["temperature"] for r in result.trajectory.steps[1].meta["resampled"]]
    assert temps == [0.7, pytest.approx(1.1)]


def test_the_failing_code_leaves_the_context_before_it_is_sampled_again(sales):
    # A small model copies its failing cell from the context, hot or not: the resample must not see it.
    bad = code("sales.groupby('country').units.sum()")
    llm = Scripted([bad, bad, code("final_answer(sales.units.sum())")])
    agent = Agent(model=llm, runtime=InProcessRuntime(), seed=0)
    agent.runtime.inject("sales", sales)
    result = agent.run("units per country")
    assert result.answer == 10
    mine = "\n".join(str(m["content"]) for m in llm.calls[2] if m["role"] == "assistant")  # the traceback keeps it
    assert "groupby('country')" not in mine
    # the line that replaces it is the user's (a stub in the model's own reply was copied as its next reply)
    task = llm.calls[2][1]["content"]
    assert task.startswith("units per country") and "An attempt here failed with KeyError" in task
    assert [m["role"] for m in llm.calls[2]] == ["system", "user"]
    assert result.trajectory.steps[1].meta["folded"] == 1
    # what a later turn sees of this one is the task as asked
    assert agent.history[0] == {"role": "user", "content": "units per country"}


def test_the_same_refused_prose_reply_again_is_sampled_again(sales):
    # greedy decoding answers the same refusal with the same paragraph: that reply is sampled again, hotter
    bad, prose = code("sales.groupby('country').units.sum()"), "The object is a DataFrame. " * 5
    llm = Scripted([bad, prose, prose, code("final_answer(int(sales.units.sum()))")])
    agent = Agent(model=llm, runtime=InProcessRuntime(), seed=0)
    agent.runtime.inject("sales", sales)
    result = agent.run("total units")
    assert result.status == "success" and result.answer == 10
    resampled = result.trajectory.steps[2].meta["resampled"]
    assert [r["temperature"] for r in resampled] == [0.7] and resampled[0]["discarded"] == prose
    assert "folded" not in result.trajectory.steps[2].meta  # nothing to fold: it had no code


def test_a_refused_prose_reply_between_two_failures_does_not_hide_the_loop(sales):
    # DABench: KeyError 'year', then prose (refused: the code failed), then the very same cell: the loop is seen
    bad = code("sales[sales['year'] == 1992]")
    replies = [bad, "The data has no year column, so I cannot filter it.", bad, code("final_answer(1)")]
    agent = Agent(model=Scripted(replies, repeat_last=True), runtime=InProcessRuntime(), retry_temperature=None)
    agent.runtime.inject("sales", sales)
    steps = agent.run("t").trajectory.steps
    assert steps[1].code is None and "your last code failed" in steps[1].observation
    assert "same error as in your previous 1 steps" in steps[2].observation and "region: " in steps[2].observation
    assert "You ran exactly the same code as in your previous step" in steps[2].observation
    # and with resampling on, the repeat is sampled again instead of run
    agent = Agent(model=Scripted([bad, "No year column.", bad, code("final_answer(2)")]), runtime=InProcessRuntime())
    agent.runtime.inject("sales", sales)
    result = agent.run("t")
    assert result.answer == 2 and result.trajectory.steps[2].meta["resampled"][0]["temperature"] == 0.7


# -- given objects are the data ----------------------------------------------------------------------
@pytest.fixture
def shop(tmp_path):
    engine = sqlalchemy.create_engine(f"sqlite:///{tmp_path / 'shop.db'}")
    pd.DataFrame({"customer": ["a", "b", "a"], "amount": [5.0, 7.0, 1.0]}).to_sql("orders", engine, index=False)
    yield engine
    engine.dispose()


def test_a_rebuilt_engine_becomes_the_given_one(shop):
    src = (
        "from sqlalchemy import create_engine\nimport pandas as pd\n"
        "engine = create_engine('sqlite:///shop.db')\n"
        "final_answer(float(pd.read_sql('SELECT SUM(amount) AS s FROM orders', engine).s[0]))"
    )
    agent = Agent(model=Scripted([code(src)]), runtime=InProcessRuntime())
    agent.runtime.inject("db", shop)
    result = agent.run("total amount")
    assert result.status == "success" and result.answer == 13.0
    notes = result.trajectory.steps[0].meta["blocks"][0]["notes"]
    assert "it ran as `engine = db`" in notes[0]


def test_the_engine_is_described_with_its_tables_and_how_to_query_it(shop):
    import asyncio

    agent = Agent(model=Scripted([]), runtime=InProcessRuntime())
    agent.runtime.inject("db", shop)
    prompt = asyncio.run(agent.system_prompt())
    assert "orders(customer TEXT, amount FLOAT)" in prompt
    assert 'pd.read_sql("SELECT ... FROM table", db)' in prompt


def test_engine_execute_gets_the_sqlalchemy_2_hint(shop):
    agent = Agent(model=Scripted([code("db.execute('SELECT 1')"), code("final_answer(1)")]), runtime=InProcessRuntime())
    agent.runtime.inject("db", shop)
    obs = agent.run("t").trajectory.steps[0].observation
    assert "Hint: a SQLAlchemy 2 engine has no execute()" in obs


# -- declared outputs and review ---------------------------------------------------------------------
def test_final_answer_waits_for_the_declared_outputs(sales):
    replies = [code("final_answer(1)"), code("by_region = sales.groupby('region').units.sum()\nfinal_answer(1)")]
    result = agent_with(replies, sales, outputs=["by_region"]).run("t")
    assert result.status == "success" and len(result.trajectory.steps) == 2
    assert "`by_region`, which does not exist" in result.trajectory.steps[0].observation


def test_review_shows_the_answer_before_it_is_accepted(sales):
    replies = [
        code("final_answer(sales.groupby('region').units.transform('max') * 0 + 4)"),
        code("final_answer(sales.groupby('region').units.sum())"),
        code("final_answer(_final_answer)"),
    ]
    result = agent_with(replies, sales, review=True).run("units per region")
    assert result.status == "success"
    assert result.answer.to_dict() == {"E": 4, "N": 4, "S": 2}
    review = result.trajectory.steps[0].observation
    assert "Review: Before this is accepted" in review and "WARNING: every value is the same" in review
    assert "units per region" in review
    # One review per run: the second answer is accepted as it is.
    assert len(result.trajectory.steps) == 2


def test_review_of_named_answers_shows_each_value_and_the_tasks_answer_format(sales):
    # a DABench-style task: a long question whose answer format comes last; the answer a dict of named values
    task = "Is the skewness of units within [-0.5, 0.5]? " + "Use the Fisher-Pearson coefficient. " * 40
    task += 'Answer format: @is_normal[answer], "answer" is "Yes" or "No".'
    replies = [code("final_answer({'is_normal': 'yes' if abs(sales.units.skew()) < 0.5 else 'no'})"),
               code("final_answer({'is_normal': 'Yes'})")]  # fmt: skip
    result = agent_with(replies, sales, review=True).run(task)
    review = result.trajectory.steps[0].observation
    assert "'is_normal': str 'yes'" in review  # the value and its type, not only the keys
    assert '"answer" is "Yes" or "No"' in review  # the end of a long task survives the cut
    assert result.status == "success" and result.answer == {"is_normal": "Yes"}


def test_auto_review_holds_only_answers_that_look_wrong(sales):
    # the default review="auto": True/False for a yes/no question, or a summary warning, is shown once ...
    task = 'Is the skewness of units within [-0.5, 0.5]? Answer "Yes" or "No".'
    replies = [code("final_answer({'is_normal': True})"), code("final_answer({'is_normal': 'Yes'})")]
    result = agent_with(replies, sales).run(task)
    assert "the task asks for the word: 'Yes'" in result.trajectory.steps[0].observation
    assert result.answer == {"is_normal": "Yes"} and len(result.trajectory.steps) == 2
    same = agent_with([code("final_answer(sales.units * 0)"), code("final_answer(sales.units)")], sales).run("x")
    assert "WARNING: every value is the same" in same.trajectory.steps[0].observation
    # named answers: four quantities with one value, or a whole table where one value goes
    alike = agent_with([code("final_answer({'a': 2.5, 'b': 2.5, 'c': 2.5})"), code("final_answer(1)")], sales)
    assert "WARNING: every value is the same" in alike.run("x").trajectory.steps[0].observation
    table = agent_with([code("final_answer({'cols': sales, 'n': 4})"), code("final_answer(1)")], sales)
    assert "'cols' is a whole table of 4 rows, not one value" in table.run("x").trajectory.steps[0].observation
    # ... an ordinary answer is accepted at once, and review=False never holds
    assert len(agent_with([code("final_answer(sales.units.sum())")], sales).run("units?").trajectory.steps) == 1
    off = agent_with([code("final_answer({'is_normal': True})")], sales, review=False).run(task)
    assert off.answer == {"is_normal": True} and len(off.trajectory.steps) == 1


def test_numbers_typed_into_the_answer_before_the_code_ran_go_back_once(sales):
    # DABench 14: the cell computed the mean (16.65) and sent final_answer({'price_range_mean': 15.45, ...}), values
    # written before any output existed. Numbers the model had seen (printed earlier) are its to copy.
    guess = (
        "total = int(sales.units.sum())\nmean = float(sales.units.mean())\nfinal_answer({'total': 12, 'mean': 2.75})"
    )
    replies = [code(guess), code("final_answer({'total': total, 'mean': mean})")]
    result = agent_with(replies, sales).run("Total and mean units.")
    note = result.trajectory.steps[0].observation
    assert "numbers typed in (2.75)" in note and "final_answer({'total': total, 'mean': mean})" in note
    assert result.status == "success" and result.answer == {"total": 10, "mean": 2.5}
    # DABench 14 again: the prints in one block, the typed answer in the next block of the same reply
    split = (
        "```python\nmean = float(sales.units.mean())\nprint(mean)\n```\n```python\nfinal_answer({'mean': 2.75})\n```"
    )
    two = agent_with([split, code("final_answer({'mean': mean})")], sales).run("Mean units.")
    assert "numbers typed in (2.75)" in two.trajectory.steps[0].observation and two.answer == {"mean": 2.5}
    seen = [code("print(sales.units.sum(), sales.units.mean())"), code("final_answer({'total': 10, 'mean': 2.5})")]
    copied = agent_with(seen, sales).run("Total and mean units.")
    assert copied.status == "success" and len(copied.trajectory.steps) == 2  # copied from the output: accepted


def test_a_whole_number_typed_with_decimals_is_a_guess_too(sales):
    # DABench 109: it printed 141.36 and 118.57 and sent 100.00 and 120.00, `success`; an int (a count) is not held
    guess = "mean = float(sales.units.mean())\nprint(mean)\nfinal_answer({'mean': 100.00, 'regions': 3})"
    replies = [code(guess), code("final_answer({'mean': mean, 'regions': 3})")]
    result = agent_with(replies, sales).run("Mean units, and how many regions.")
    assert "numbers typed in (100.00)" in result.trajectory.steps[0].observation
    assert result.status == "success" and result.answer == {"mean": 2.5, "regions": 3}


def test_a_named_statistic_out_of_its_range_is_reviewed_and_cannot_stand_as_success(sales):
    # DABench 34: a p-value of -0.1318 ended `success`
    replies = [code("final_answer({'r': 0.2, 'p_value': -0.1318})")] * 2
    result = agent_with(replies, sales).run("Correlation of units and its p-value.")
    assert "WARNING: 'p_value' is -0.1318; a p-value is between 0 and 1" in result.trajectory.steps[0].observation
    assert result.status == "failed_checks" and result.answer == {"r": 0.2, "p_value": -0.1318}
    fixed = agent_with([replies[0], code("final_answer({'r': 0.2, 'p_value': 0.41})")], sales).run("Correlation?")
    assert fixed.status == "success"


@pytest.mark.parametrize(
    ("answer", "warning"),
    [
        ("{'p_value': 1.0, 'significance': 'no'}", "'p_value' is 1.0; a p-value of exactly 1"),  # DABench 177
        ("{'model_score': 1.0}", "'model_score' is 1.0; a perfect score usually means the target"),  # 137
        ("{'skewness_value': 0.0, 'kurtosis_value': 0.0}", "'skewness_value' is 0.0; exactly 0 comes from"),  # 222
    ],
)
def test_a_statistic_that_real_data_almost_never_gives_exactly_is_reviewed(sales, answer, warning):
    replies = [code(f"final_answer({answer})")] * 2
    result = agent_with(replies, sales).run("Test the units; report the statistics.")
    assert f"WARNING: {warning}" in result.trajectory.steps[0].observation
    assert result.status == "failed_checks"  # resent as it was: the answer stands, not as a success


def test_a_verdict_from_a_test_over_missing_values_is_held_and_cannot_stand(sales):
    # DABench 298: shapiro(df['nsamplecov']) over NaN gave p = nan, is_normal "no", `success`
    sales = sales.assign(units=[1.0, None, 3.0, 4.0])
    guess = (
        "from scipy.stats import shapiro\np = shapiro(sales['units']).pvalue\n"
        "final_answer({'is_normal': 'yes' if p > 0.05 else 'no'})"
    )
    result = agent_with([code(guess)] * 2, sales).run("Is units normal (Shapiro-Wilk, alpha 0.05)? yes or no.")
    obs = result.trajectory.steps[0].observation
    assert "shapiro() returned nan because 1 of the 4 values of 'units' are missing" in obs
    assert "this answer rests on a scipy.stats call that returned nan" in obs
    assert result.status == "failed_checks" and "returned nan over missing values" in result.trajectory.error
    fixed = code("from scipy.stats import shapiro\np = shapiro(sales['units'].dropna()).pvalue\nfinal_answer({'p': p})")
    assert agent_with([code(guess), fixed], sales).run("Shapiro p-value of units?").status == "success"


def test_a_statistic_over_missing_values_is_held_with_the_call_that_drops_them(sales):
    # DABench 309: scipy's skew/kurtosis of Age (177 NaN) were nan; the answer sent them twice and ended failed_checks
    sales = sales.assign(units=[1.0, None, 3.0, 4.0])
    nan = "from scipy.stats import skew, kurtosis\nfinal_answer({'skew': skew(sales['units']), 'kurt': kurtosis(sales.units)})"
    fixed = "final_answer({'skew': round(skew(sales['units'].dropna()), 2)})"
    result = agent_with([code(nan), code(fixed)], sales).run("Skewness of units (scipy)?")
    obs = result.trajectory.steps[0].observation
    assert "skew() returned nan because 1 of the 4 values of 'units' are missing" in obs
    assert "a statistic over a nan is nan; drop them first: skew(df['units'].dropna())" in obs
    assert "skew(df[col].dropna())" in obs  # the hold says it too
    assert result.status == "success" and result.answer == {"skew": -0.38}


def test_a_variable_sent_as_its_own_strongest_correlate_is_held(sales):
    # DABench 117: 'Happiness Score' sent as the variable most correlated with the happiness score, `success`
    sales = sales.assign(price=[10.0, 5.0, 10.0, 2.5])
    pick = "c = sales[['units', 'price']].corr()\nfinal_answer(c['units'].abs().idxmax())"
    fixed = "final_answer(c['units'].drop('units').abs().idxmax())"
    result = agent_with([code(pick), code(fixed)], sales).run("Which variable correlates most with units?")
    assert "idxmax() picked 'units' itself" in result.trajectory.steps[0].observation
    assert result.status == "success" and result.answer == "price"
    kept = agent_with([code(pick)] * 2, sales).run("Which variable correlates most with units?")
    assert kept.status == "failed_checks" and "the variable itself" in kept.trajectory.error


def test_a_given_table_read_again_from_its_file_comes_back_as_it_was_given(sales):
    # DABench 175: `df = df.dropna()` left 183 of 891 rows (Cabin is mostly missing); each later cell re-read the
    # file, the line was skipped, and the z-scores ran on the 183 rows: 0 outliers for 2, `success`
    sales = sales.assign(cabin=[None, None, "C85", None])
    first = code("sales = sales.dropna()\nprint(len(sales))")
    again = code("import pandas as pd\nsales = pd.read_csv('sales.csv')\nfinal_answer(len(sales))")
    result = agent_with([first, again], sales).run("How many sales rows are there?")
    assert result.answer == 4
    note = result.trajectory.steps[1].observation
    assert "`sales` had been changed by earlier code (1 rows x 3 columns" in note
    assert "it is back as it was given (4 rows x 3 columns" in note
    untouched = agent_with([code("import pandas as pd\nsales = pd.read_csv('s.csv')\nfinal_answer(len(sales))")], sales)
    kept = untouched.run("How many rows?")
    assert kept.answer == 4 and "had been changed" not in kept.trajectory.steps[0].observation


def test_a_table_read_again_by_a_cell_that_uses_a_column_earlier_code_made_keeps_that_work(sales):
    # DABench 431: df['high_damage'] made in one cell; the next, with its habitual df = pd.read_csv(...), read it
    # and failed with KeyError three times, the table put back as given under it
    first = code("sales = sales.assign(big=sales['units'] > 2)\nprint(sales['big'].sum())")
    again = code(
        "import pandas as pd\nsales = pd.read_csv('sales.csv')\nfinal_answer(int(sales[sales['big']].units.sum()))"
    )
    result = agent_with([first, again], sales).run("Units of the big sales?")
    assert result.status == "success" and result.answer == int(sales[sales["units"] > 2].units.sum())
    assert "had been changed" not in result.trajectory.steps[1].observation
    remade = code(
        "import pandas as pd\nsales = pd.read_csv('sales.csv')\nsales['big'] = sales['units'] > 3\nfinal_answer(len(sales))"
    )
    redone = agent_with([first, remade], sales).run("t")  # the cell makes the column itself: the table as given
    assert "had been changed" in redone.trajectory.steps[1].observation


def test_a_warning_travels_with_the_form_note_and_cannot_stand(sales):
    # DABench 34 at 3efedc3: held for its decimals only, the p-value of -0.1318 (a Spearman r) was resent and stood
    task = "Correlation of units and its p-value? r rounded to 2 decimals, p_value rounded to 4 decimal places."
    first = code("final_answer({'r': 0.04294, 'p_value': -0.131836})")
    result = agent_with([first, code("final_answer({'r': 0.04, 'p_value': -0.1318})")], sales).run(task)
    obs = result.trajectory.steps[0].observation
    assert "4 decimal places" in obs and "WARNING: 'p_value' is -0.131836; a p-value is between 0 and 1" in obs
    assert "run this" not in obs  # the fixed call would carry the impossible value
    assert result.status == "failed_checks" and result.answer == {"r": 0.04, "p_value": -0.1318}


def test_an_accuracy_of_zero_is_reviewed_and_cannot_stand_as_success(sales):
    # DABench 224: an accuracy of 0.0 from a wrong target column ended `success`
    replies = [code("final_answer({'accuracy_score': 0.0})")] * 2
    result = agent_with(replies, sales).run("Train a classifier on units; report its accuracy.")
    assert (
        "WARNING: 'accuracy_score' is 0.0; a score of 0 means no prediction" in result.trajectory.steps[0].observation
    )
    assert result.status == "failed_checks"


def test_a_number_for_which_product_goes_back_once(sales):
    # analyst product_rise: idxmax over a frame without the product as its index gave 0, accepted as the product
    sales = sales.assign(product=["phone", "tv", "phone", "radio"])
    replies = [code("final_answer(int(sales.units.idxmax()))"),
               code("final_answer(sales.loc[sales.units.idxmax(), 'product'])")]  # fmt: skip
    result = agent_with(replies, sales).run("Which product sold the most units in one order?")
    assert "the task asks which product; the answer is the number 3" in result.trajectory.steps[0].observation
    assert result.status == "success" and result.answer == "radio"
    again = agent_with([replies[0]] * 2, sales).run("Which product sold the most units in one order?")
    assert again.status == "failed_checks" and again.answer == 3  # the number sent again is still not a product
    assert "the answer is the number 3" in again.trajectory.error


def test_yes_and_no_quoted_apart_are_words_asked_for_in_the_tasks_case(sales):
    # DABench 10: '"response" is a string that takes the value "yes" if the data follows a normal distribution,
    # and "no" if it does not'; the 1.5B sent numpy's True and it was accepted at once
    task = (
        'Is units normal? Answer format: @is_normal[response], where "response" is a string that takes the value '
        '"yes" if the data follows a normal distribution, and "no" if it does not.'
    )
    replies = [code("import numpy as np\nfinal_answer({'is_normal': np.bool_(False)})"),
               code("final_answer({'is_normal': 'no'})")]  # fmt: skip
    result = agent_with(replies, sales).run(task)
    assert "'is_normal' is the bool False; the task asks for the word: 'no'" in result.trajectory.steps[0].observation
    assert result.status == "success" and result.answer == {"is_normal": "no"}


def test_an_answer_not_in_the_tasks_form_comes_back_with_the_call_that_fixes_it(sales):
    # "rounded to two decimal places" / "Yes or No" / the keys the task spells out: what a small model gets
    # wrong with the right numbers; the note names each problem and gives the fixed call to run, once
    task = (
        "Mean and median of units. Round the mean to two decimal places and the median to 1 decimal. "
        "Is the mean above 2? Answer Yes or No. Call final_answer({'mean': ..., 'median': ..., 'above': ...})"
    )
    first = "final_answer({'mean': sales.units.mean() + 1/3, 'median': sales.units.median(), 'above': bool(sales.units.mean() > 2)})"
    fix = "final_answer({'mean': 2.83, 'median': 2.5, 'above': 'Yes'})"
    result = agent_with([code(first), code(fix)], sales).run(task)
    note = result.trajectory.steps[0].observation
    assert "'mean' is 2.8333333333333335; the task asks for 2 decimal places: 2.83" in note
    assert "'above' is the bool True; the task asks for the word: 'Yes'" in note
    assert "```python\n" + fix + "\n```" in note  # the median is 2.5: already in form, kept as it is
    assert result.status == "success" and result.answer == {"mean": 2.83, "median": 2.5, "above": "Yes"}
    missing = agent_with([code("final_answer({'mean': 2.5})")] * 3, sales).run(task)
    assert "the answer has no 'median', 'above'" in missing.trajectory.steps[0].observation
    assert "Fix it and call final_answer again" in missing.trajectory.steps[0].observation
    # once per run: the model's next answer stands, but one that still misses keys is not a success (the second
    # answer is held once more: no code of it compares the mean with the task's 2)
    assert "'above 2': no code uses 2" in missing.trajectory.steps[1].observation
    assert missing.status == "failed_checks" and len(missing.trajectory.steps) == 3
    assert missing.answer == {"mean": 2.5} and "the answer has no 'median', 'above'" in missing.trajectory.error
    off = agent_with([code("final_answer({'mean': 2.5})")], sales, review=False).run(task)
    assert len(off.trajectory.steps) == 1


def test_an_answer_sent_again_with_the_warning_it_was_held_for_is_not_a_success(sales):
    # DABench 453: four means, all 27.7, held for review, then sent again as they were: the model's
    # confirmation is no evidence, so the run ends failed_checks with the answer and the warning named
    alike = "final_answer({'a': 27.7, 'b': 27.7, 'c': 27.7})"
    result = agent_with([code(alike), code(alike)], sales).run("the mean of a, b and c")  # echoed on every sample
    assert result.status == "failed_checks" and result.answer == {"a": 27.7, "b": 27.7, "c": 27.7}
    assert result.trajectory.meta["failed_checks"] == ["the answer still has a warning: every value is the same"]
    assert "every value is the same" in result.trajectory.error
    # a fixed answer after the same hold is a success; so is a held Yes/No fixed (no warning was kept)
    fixed = agent_with([code(alike), code("final_answer({'a': 1.5, 'b': 27.7, 'c': 3.0})")], sales).run("means")
    assert fixed.status == "success" and "failed_checks" not in fixed.trajectory.meta
    # a session's next turn sees the kept answer's code, as after a success
    agent = agent_with([code(alike), code(alike), code(alike), code(alike), code("final_answer(1)")], sales)
    agent.run("the mean of a, b and c")  # (the echo of the held code is sampled again twice before it stands)
    assert "final_answer({'a': 27.7" in agent.history[-1]["content"]


def test_ids_where_the_task_asks_for_the_customers_come_back_with_how_to_add_names():
    # analyst top_customers_2025: "Find the 3 customers ..." answered with customer_id and amount; the row
    # check passed, so it was a success. The form check runs with checks too (after they pass).
    customers = pd.DataFrame({"customer_id": [1, 2, 3], "name": ["Ada Moss", "Gus Hart", "Kai Shaw"]})
    orders = pd.DataFrame({"customer_id": [1, 2, 2, 3, 3, 3], "amount": [5.0, 4.0, 4.0, 1.0, 1.0, 9.0]})
    ids = "final_answer(orders.groupby('customer_id', as_index=False)['amount'].sum().nlargest(2, 'amount'))"
    names = (
        "t = orders.groupby('customer_id', as_index=False)['amount'].sum().nlargest(2, 'amount')\n"
        "final_answer(t.merge(customers[['customer_id', 'name']], on='customer_id'))"
    )
    for kw in ({}, {"checks": {"answer": {"rows": 2}}}):
        agent = Agent(model=Scripted([code(ids), code(names)]), runtime=InProcessRuntime(), **kw)
        agent.runtime.inject("customers", customers)
        agent.runtime.inject("orders", orders)
        result = agent.run("Find the 2 customers with the highest total.")
        note = result.trajectory.steps[0].observation
        assert "the answer gives the customers as 'customer_id' values (3, 2)" in note
        assert ".merge(customers[['customer_id', 'name']], on='customer_id')" in note
        assert result.status == "success" and result.answer["name"].tolist() == ["Kai Shaw", "Gus Hart"]
    # a table keyed by ids where the task asks for a value per customer is an answer as it is
    agent = Agent(model=Scripted([code(ids)]), runtime=InProcessRuntime())
    agent.runtime.inject("customers", customers)
    agent.runtime.inject("orders", orders)
    assert agent.run("total amount per customer").status == "success"


def test_a_table_of_days_for_one_row_per_month_is_sent_back_with_how_to_group():
    orders = pd.DataFrame({"date": ["2025-01-05", "2025-01-06", "2025-02-01", "2025-02-09"], "amount": [1, 2, 3, 4]})
    by_day = "final_answer(orders.groupby('date', as_index=False)['amount'].sum())"
    by_month = "final_answer(orders.groupby(pd.to_datetime(orders['date']).dt.to_period('M'))['amount'].sum())"
    for kw in ({}, {"checks": {"answer": {"rows": 2}}}):  # without checks (review) and with them (the check's note)
        agent = Agent(
            model=Scripted([code(by_day), code("import pandas as pd\n" + by_month)]), runtime=InProcessRuntime(), **kw
        )
        agent.runtime.inject("orders", orders)
        result = agent.run("revenue per month")
        note = result.trajectory.steps[0].observation
        assert "one row per month, but the 4 rows hold 4 dates in 2 months (column 'date')" in note
        assert ".dt.to_period('M')" in note
        assert result.status == "success" and result.answer.tolist() == [3, 7]


def test_prose_after_a_held_answer_is_not_the_answer(sales):
    # the answer was held (here: not rounded as asked); "The mean is 2.5." neither fixes nor confirms it
    task = "Mean units, rounded to two decimal places."
    replies = [code("final_answer(sales.units.mean() + 1/3)"), "The mean is 2.83.", code("final_answer(2.83)")]
    result = agent_with(replies, sales).run(task)
    assert "your last answer was not accepted yet" in result.trajectory.steps[1].observation
    assert result.status == "success" and result.answer == 2.83


def test_prose_is_not_the_answer_when_the_task_asks_for_final_answer(sales):
    # the answers printed, then stated in prose: the task named the call, so the model is asked to make it
    task = "Total units. Call final_answer({'total': ...})"
    replies = [code("total = int(sales.units.sum())\nprint(f'@total[{total}]')"), "The total is 10.",
               code("final_answer({'total': total})")]  # fmt: skip
    result = agent_with(replies, sales).run(task)
    assert "the task asks for the answer through final_answer" in result.trajectory.steps[1].observation
    assert result.status == "success" and result.answer == {"total": 10}
    # a task that does not name it takes the prose as the answer
    plain = agent_with(replies[:2], sales).run("Total units?")
    assert plain.status == "no_code" and plain.answer == "The total is 10."


def test_review_is_skipped_when_the_task_has_checks(sales):
    agent = agent_with([code("final_answer(3)")], sales, review=True, checks={"answer": {"type": "int"}})
    result = agent.run("t")
    assert result.status == "success" and len(result.trajectory.steps) == 1


def test_a_given_table_changed_in_place_and_read_again_comes_back_as_given(sales):
    """DABench 271: a log applied in place keeps shape and dtypes, so the preview did not show the change; the cell
    run again (re-reading the file, the line skipped) took the log of the log and sent NaN, `success`. In a kernel
    the host keeps the table as given, and the data itself is compared."""
    from cave.runtimes.kernel import KernelRuntime

    logged = code("import numpy as np\nsales['units'] = np.log10(sales['units'])\nprint(sales['units'].iloc[0])")
    logged_again = code(
        "import numpy as np, pandas as pd\nsales = pd.read_csv('sales.csv')\n"
        "sales['units'] = np.log10(sales['units'])\nfinal_answer(round(float(sales['units'].iloc[0]), 3))"
    )
    units = sales.assign(units=[100.0, 10.0, 1000.0, 10.0])
    with KernelRuntime(timeout=30) as rt:
        rt.inject("sales", units)
        first = Agent(model=Scripted([logged_again]), runtime=rt, max_steps=2).run("log10 of row 1's units?")
        assert first.answer == 2.0 and "had been changed" not in first.trajectory.steps[0].observation  # as given
        rt.inject("sales", units)
        result = Agent(model=Scripted([logged, logged_again]), runtime=rt, max_steps=3).run("log10 of row 1's units?")
    assert result.answer == 2.0
    note = result.trajectory.steps[1].observation
    assert "`sales` had been changed by earlier code (its values changed in place); it is back as it was given" in note


def test_an_answer_an_untrusted_kernel_cannot_hand_back_is_fed_back_not_fatal():
    """final_answer(obj) with no safe form (here a class instance) in a sandbox-like kernel: the model is told to
    pass plain data and the run goes on, instead of ending in a TransferError."""
    from cave.runtimes.kernel import KernelRuntime

    with KernelRuntime(timeout=20, trust=False) as rt:
        agent = Agent(
            model=Scripted([code("class Box:\n    pass\nfinal_answer(Box())"), code("final_answer({'n': 2})")]),
            runtime=rt,
            max_steps=3,
        )
        result = agent.run("Give the answer.")
    assert result.status == "success" and result.answer == {"n": 2}
    first = result.trajectory.steps[0]
    assert "final_answer was NOT accepted: this runtime can hand back only plain data" in first.observation


def test_the_summary_at_max_steps_is_asked_without_the_code_prefix():
    # a response prefix opens a code block; the summary call says "do not write code", so it must not get one
    llm = Scripted(["x = 1\n```", "I set x to 1 but did not finish."])
    agent = Agent(model=llm, runtime=InProcessRuntime(), max_steps=1, response_prefix="```python\n")
    result = agent.run("set x")
    assert result.status == "max_steps" and llm.prefixes == ["```python\n", ""]
    assert result.trajectory.steps[-1].kind == "summary" and "```" not in result.answer


def test_an_answer_computed_after_a_lossy_coercion_is_held_once():
    # DABench 56: to_numeric(errors="coerce") dropped '298[110-510]'-style values and the max came out wrong
    deaths = pd.DataFrame({"country": ["A", "B", "C"], "deaths": ["298[110-510]", "7", "13316[9970-16600]"]})
    lossy = code("import pandas as pd\nd = pd.to_numeric(deaths['deaths'], errors='coerce')\nfinal_answer(d.max())")
    fixed = code("d = deaths['deaths'].str.extract(r'^(\\d+)')[0].astype(int)\nfinal_answer(int(d.max()))")
    agent = Agent(model=Scripted([lossy, fixed]), runtime=InProcessRuntime())
    agent.runtime.inject("deaths", deaths)
    result = agent.run("the highest number of deaths")
    first = result.trajectory.steps[0].observation
    assert "turned 2 of 3 non-empty values of 'deaths' into NaN" in first and "Not accepted yet" in first
    assert result.status == "success" and result.answer == 13316
    # held once: a confirmed (or re-run) lossy answer ends the run with that answer, but not as a success
    for again in (
        "final_answer(_final_answer)",
        "import pandas as pd\nfinal_answer(pd.to_numeric(deaths['deaths'], errors='coerce').max())",
    ):
        agent = Agent(model=Scripted([lossy, code(again)]), runtime=InProcessRuntime())
        agent.runtime.inject("deaths", deaths)
        result = agent.run("the highest number of deaths")
        assert result.status == "failed_checks" and result.answer == 7.0 and len(result.trajectory.steps) == 2
        assert result.trajectory.meta["failed_checks"] == [
            "the answer is the one computed after a conversion turned values into NaN; they were not recovered"
        ]
        assert result.trajectory.called_final_answer and not result.ok


def test_an_answer_from_a_selection_that_matched_nothing_is_held_once():
    # analyst march_signups: str.contains('Mar 2025') over ISO dates gave 0 signups, and `success`
    signups = pd.DataFrame({"user_id": [1, 2, 3], "signup_date": ["2025-03-04", "2025-03-15", "2025-04-01"]})
    guess = code("final_answer(len(signups[signups['signup_date'].str.contains('Mar 2025')]))")
    fixed = code("final_answer(int(signups['signup_date'].str.startswith('2025-03').sum()))")
    for second, status, answer in (
        (fixed, "success", 2),
        (code("final_answer(_final_answer)"), "failed_checks", 0),  # a confirmed 0 from nothing is no success
    ):
        agent = agent_with([guess, second])
        agent.runtime.inject("signups", signups)
        result = agent.run("How many users signed up in March 2025?")
        first = result.trajectory.steps[0].observation
        assert ".str.contains('Mar 2025') matched none of the 3 values" in first and "'2025-03-04'" in first
        assert "Not accepted yet: this answer was computed from a selection that matched nothing" in first
        assert result.status == status and result.answer == answer


def test_a_text_match_on_dates_is_held_with_the_cell_that_compares_dates():
    # analyst march_signups: told to compare each date's month, the 1.5B sent .str.contains('Mar 2025', na=False)
    signups = pd.DataFrame({"signup_date": ["2025/03/04", "Mar 15 2025", "01 Apr 2025", "2025-03-30"]})
    guess = code("m = signups[signups['signup_date'].str.contains('Mar 2025', na=False)]\nfinal_answer(len(m))")
    held = "Your code with the dates compared as dates (run it):"

    def model(messages):  # the guess, then the cell the note gives
        last = str(messages[-1]["content"])
        return last.split(held, 1)[1].split("If no row", 1)[0] if held in last else guess

    agent = Agent(model=Scripted(model), runtime=InProcessRuntime())
    agent.runtime.inject("signups", signups)
    result = agent.run("How many users signed up in March 2025?")
    first = result.trajectory.steps[0].observation
    assert held in first
    assert "(pd.to_datetime(signups['signup_date'], format='mixed').dt.to_period('M') == '2025-03')" in first
    assert result.status == "success" and result.answer == 3


def test_an_answer_picked_from_a_wide_tie_is_held_once():
    # analyst busiest_hour: groupby('timestamp').size() is 1 per timestamp; idxmax took the first (hour 2, not 9)
    stamps = pd.to_datetime(["2025-01-01 02:00", "2025-01-01 09:00", "2025-01-01 09:30", "2025-01-02 09:10"])
    requests = pd.DataFrame({"timestamp": stamps})
    fine = code("final_answer(int(requests.groupby('timestamp').size().idxmax().hour))")
    hourly = code("final_answer(int(requests['timestamp'].dt.hour.value_counts().idxmax()))")
    for second, status, answer in ((hourly, "success", 9), (code("final_answer(_final_answer)"), "failed_checks", 2)):
        agent = agent_with([fine, second])
        agent.runtime.inject("requests", requests)
        result = agent.run("What hour of the day gets the most requests?")
        first = result.trajectory.steps[0].observation
        assert "idxmax() picked the first of 4 entries tied at 1 (of 4)" in first and "Not accepted yet" in first
        assert "e.g.: requests.groupby(requests['timestamp'].dt.hour).size().idxmax()" in first  # the line to run
        assert result.status == status and result.answer == answer
    agent = agent_with([code("final_answer(int(requests.groupby(requests['timestamp'].dt.hour).size().idxmax()))")])
    agent.runtime.inject("requests", requests)
    assert agent.run("What hour of the day gets the most requests?").answer == 9  # the suggested line is right


def ran(replies: list, task: str, **tables: pd.DataFrame):
    """The run of scripted ``replies`` on ``task`` with ``tables`` given, and its first observation."""
    agent = agent_with(replies)
    for name, table in tables.items():
        agent.runtime.inject(name, table)
    result = agent.run(task)
    return result, result.trajectory.steps[0].observation


def test_an_answer_from_a_selection_that_left_out_other_spellings_is_held_once():
    # a dev probe: clinic['species'] == 'Dog' over 'Dog', ' dog', 'DOG' averaged a third of the dogs' fees, `success`
    clinic = pd.DataFrame({"species": ["Dog", " dog", "DOG", "Cat", "Dog "], "fee": [10.0, 20.0, 30.0, 99.0, 40.0]})
    exact = code("dogs = clinic[clinic['species'] == 'Dog']\nfinal_answer(round(dogs['fee'].mean(), 2))")
    fixed = code("final_answer(round(clinic[clinic['species'].str.strip().str.lower() == 'dog']['fee'].mean(), 2))")
    for second, status, answer in (
        (fixed, "success", 25.0),
        (exact, "failed_checks", 10.0),  # computed again the same way: it still leaves the other spellings out
        (code("final_answer(round(dogs['fee'].mean(), 2))"), "failed_checks", 10.0),  # from the same selection
        (code("final_answer(_final_answer)"), "success", 10.0),  # confirmed as it was: the task means that spelling
    ):
        result, first = ran([exact, second], "What is the average fee of visits for dogs?", clinic=clinic)
        assert "left out 3 rows of 'species' that hold it spelled another way" in first
        assert "Not accepted yet: the column this answer was computed from holds one value written several" in first
        assert "dogs = clinic[clinic['species'].str.strip().str.lower() == 'dog']\n" in first  # the code to run
        assert first.index("dogs = clinic[") < first.index("final_answer(_final_answer)")  # first: a copy runs it
        assert result.status == status and result.answer == answer and len(result.trajectory.steps) == 2
    result, _ = ran([fixed], "What is the average fee of visits for dogs?", clinic=clinic)  # every spelling: not held
    assert result.status == "success" and result.answer == 25.0 and len(result.trajectory.steps) == 1


def test_a_pick_among_groups_that_split_one_value_by_its_spelling_is_held_once():
    # a dev probe: units per supplier over 'Acme', 'acme ', 'ACME' ranks three parts of Acme; Cobalt came out on top
    deliveries = pd.DataFrame(
        {"supplier": ["Acme", "acme ", "ACME", "Cobalt", "Cobalt", "Acme"], "units": [20, 30, 25, 40, 30, 10]}
    )
    split = code("final_answer(deliveries.groupby('supplier')['units'].sum().idxmax())")
    fixed = code(
        "final_answer(deliveries.groupby(deliveries['supplier'].str.strip().str.lower())['units'].sum().idxmax())"
    )
    for second, status, answer in ((fixed, "success", "acme"), (split, "failed_checks", "Cobalt")):
        result, first = ran([split, second], "Which supplier delivered the most units in total?", deliveries=deliveries)
        assert "idxmax() picked 'Cobalt' from groups of 'supplier' that hold one label spelled another way" in first
        assert "df.groupby(df['supplier'].str.strip().str.lower())" in first and "Not accepted yet" in first
        assert "deliveries.groupby(deliveries['supplier'].str.strip().str.lower())['units']" in first
        assert result.status == status and result.answer == answer


def test_a_total_beside_an_empty_selection_can_be_confirmed():
    # no order was refunded: the total of the others is the answer, and confirming it stands
    orders = pd.DataFrame({"status": ["paid", "paid"], "amount": [5.0, 7.0]})
    total = code(
        "refunds = orders[orders.status == 'refunded']\nfinal_answer(float(orders.amount.sum() - refunds.amount.sum()))"
    )
    agent = agent_with([total, code("final_answer(_final_answer)")])
    agent.runtime.inject("orders", orders)
    result = agent.run("Net revenue after refunds?")
    assert "matched none" in result.trajectory.steps[0].observation
    assert result.status == "success" and result.answer == 12.0


def test_text_fed_to_a_model_brings_the_line_that_builds_the_tasks_features():
    # DABench 7: fit on the whole frame failed on Name, then Ticket, one dropped column per step, until max_steps
    people = pd.DataFrame({"Name": ["Ann", "Bo", "Cy"], "Sex": ["f", "m", "m"], "Age": [30.0, 4.0, 50.0],
                           "Survived": [1, 0, 0]})  # fmt: skip
    fit = "from sklearn.linear_model import LinearRegression\nLinearRegression().fit(people.drop(columns='Survived'), people.Survived)"
    agent = agent_with([code(fit), code("final_answer(1)")])
    agent.runtime.inject("people", people)
    result = agent.run("Predict Survived from the features 'Sex' and 'Age' with linear regression.")
    obs = result.trajectory.steps[0].observation
    assert "'Ann' is in people['Name'], a text column" in obs
    assert "X = pd.get_dummies(people[['Sex', 'Age']], columns=['Sex'], dtype=float)" in obs


def test_a_mean_per_group_that_pd_cut_left_values_out_of_is_held_once():
    # DABench 6: bins=[0, 12, ...] put no group on age 0 and the Child mean came out 31.54 for 31.09
    people = pd.DataFrame({"age": [0.0, 8, 40, 70], "fare": [5.0, 15.0, 30.0, 50.0]})
    binned = "import pandas as pd\ng = pd.cut(people.age, bins=[0, 12, 59, 200], labels=['child', 'adult', 'old'])\n"
    lossy = code(binned + "final_answer(people.groupby(g, observed=True).fare.mean().round(2).to_dict())")
    binned_all = binned.replace("200]", "200], include_lowest=True")
    fixed = code(binned_all + "final_answer(people.groupby(g, observed=True).fare.mean().round(2).to_dict())")
    agent = agent_with([lossy, fixed])
    agent.runtime.inject("people", people)
    result = agent.run("Mean fare of children (0-12), adults (13-59) and the old (60+)?")
    first = result.trajectory.steps[0].observation
    assert "pd.cut turned 1 of 4 non-empty values of 'age' into NaN, e.g. 0.0" in first and "Not accepted yet" in first
    assert result.status == "success" and result.answer == {"child": 10.0, "adult": 30.0, "old": 50.0}


# -- given functions: called, not described, redefined or imported -----------------------------------
def _tool_agent(replies: list, **kw) -> tuple[Agent, list]:
    calls: list = []

    def country_capital(country: str) -> str:
        """The capital of a country."""
        calls.append(country)
        return "Brasília"

    agent = Agent(model=Scripted(replies, repeat_last=True), runtime=InProcessRuntime(), **kw)
    agent.runtime.inject_function(country_capital)
    return agent, calls


def test_prose_that_names_a_function_it_did_not_call_is_sent_back_once():
    replies = [
        "I call `country_capital` with 'Brazil'; it returns Brasília.",
        code("final_answer(country_capital('Brazil'))"),
    ]
    agent, calls = _tool_agent(replies)
    result = agent.run("What is the capital of Brazil?")
    assert result.status == "success" and result.answer == "Brasília" and calls == ["Brazil"]
    assert "nothing ran: `country_capital` was not called" in result.trajectory.steps[0].observation


def test_a_second_prose_reply_naming_the_function_is_taken_as_the_answer():
    # "none of these fits" naming a function is a legitimate answer: it is questioned once, not forever
    replies = ["`country_capital` cannot give a population.", "None fits: `country_capital` gives capitals only."]
    agent, calls = _tool_agent(replies, max_steps=4)
    result = agent.run("What is the population of Brazil?")
    assert result.status == "no_code" and result.answer.startswith("None fits") and calls == []
    assert len(result.trajectory.steps) == 2


def test_prose_after_the_function_was_called_is_an_answer():
    agent, calls = _tool_agent([code("print(country_capital('Brazil'))"), "`country_capital` says Brasília."])
    result = agent.run("What is the capital of Brazil?")
    assert result.status == "no_code" and calls == ["Brazil"]


def test_a_redefined_or_imported_given_function_is_skipped_and_the_real_one_runs():
    src = (
        "from your_module import country_capital\n"
        "def country_capital(country):\n"
        "    return 'Rio'\n"
        "final_answer(country_capital('Brazil'))"
    )
    agent, calls = _tool_agent([code(src)])
    result = agent.run("What is the capital of Brazil?")
    assert result.status == "success" and result.answer == "Brasília" and calls == ["Brazil"]
    notes = " ".join(result.trajectory.steps[0].observation.splitlines())
    assert "your import of it was skipped" in notes and "your definition of it was skipped" in notes


def test_expect_calls_sends_back_an_answer_worked_out_without_the_functions():
    # BFCL simple_python_27/31: the model computed the answer itself (in prose, or in code then "done") and
    # never called the given function; with expect_calls the first such answer goes back once, listing them
    for first in ("The capital of Brazil is Brasília.", code("final_answer('Brasília')")):
        agent, calls = _tool_agent([first, code("final_answer(country_capital('Brazil'))")], expect_calls=True)
        result = agent.run("What is the capital of Brazil?")
        assert "none of them has been called (`country_capital`)" in result.trajectory.steps[0].observation
        assert result.status == "success" and calls == ["Brazil"] and len(result.trajectory.steps) == 2
    # once: "none of these fits" stands the second time (BFCL irrelevance)
    replies = ["No function gives populations.", "None of the functions gives a population."]
    agent, calls = _tool_agent(replies, expect_calls=True)
    result = agent.run("What is the population of Brazil?")
    assert result.status == "no_code" and result.answer.startswith("None of") and calls == []
    # a call made, or expect_calls off (the default), and the answer stands at once
    agent, calls = _tool_agent([code("print(country_capital('Brazil'))"), "It is Brasília."], expect_calls=True)
    assert agent.run("Capital of Brazil?").status == "no_code" and calls == ["Brazil"]
    agent, _ = _tool_agent(["The capital of Brazil is Brasília."])
    assert len(agent.run("What is the capital of Brazil?").trajectory.steps) == 1


def test_a_reply_that_copies_the_refusal_note_is_sampled_again():
    # BFCL simple_python_27: the 1.5B answered the "call it" note with the note itself, word for word
    echo = (
        "Not accepted yet: this task is done by calling this session's functions, and none of them has been "
        "called (`country_capital`)."
    )
    replies = ["The capital of Brazil is Brasília.", echo, code("final_answer(country_capital('Brazil'))")]
    agent, calls = _tool_agent(replies, expect_calls=True, retry_temperature=0.7)
    result = agent.run("What is the capital of Brazil?")
    assert result.status == "success" and calls == ["Brazil"] and len(result.trajectory.steps) == 2
    assert result.trajectory.steps[1].meta["resampled"][0]["discarded"] == echo


def test_with_checks_that_pass_a_kept_problem_does_not_override_success():
    # the task's own checks define success; the lossy-conversion hold still happens once
    deaths = pd.DataFrame({"country": ["A", "B", "C"], "deaths": ["298[110-510]", "7", "13316[9970-16600]"]})
    lossy = code("import pandas as pd\nd = pd.to_numeric(deaths['deaths'], errors='coerce')\nfinal_answer(d.max())")
    agent = Agent(
        model=Scripted([lossy, code("final_answer(_final_answer)")]),
        runtime=InProcessRuntime(),
        checks={"answer": {"type": "float"}},
    )
    agent.runtime.inject("deaths", deaths)
    result = agent.run("the highest number of deaths")
    assert "Not accepted yet" in result.trajectory.steps[0].observation
    assert result.status == "success" and result.trajectory.meta["checks"] == {"passed": ["answer"]}


def test_a_call_to_a_function_the_session_does_not_have_names_the_ones_it_has():
    # BFCL irrelevance_40: derivative('2x', 1) four times, NameError each time, until max_steps
    replies = [code("final_answer(population('Brazil'))"), "None of the functions gives a population."]
    agent, calls = _tool_agent(replies)
    result = agent.run("What is the population of Brazil?")
    note = result.trajectory.steps[0].observation
    assert "`population` does not exist in this session" in note
    assert result.status == "no_code" and calls == []
    # a NameError for a variable (not a call) is left to the usual notes
    agent, _ = _tool_agent([code("print(capital)"), code("final_answer(country_capital('Brazil'))")])
    assert "does not exist in this session" not in agent.run("Capital?").trajectory.steps[0].observation


def test_an_array_answer_goes_through_the_form_check():
    # BFCL irrelevance_2: final_answer(np.roots(...)) crashed the run (the form check called .item() on an array)
    replies = [code("import numpy as np\nfinal_answer(np.roots([3, -2, -5]))")]
    result = agent_with(replies).run("Solve for the roots of 3x^2 - 2x - 5, rounded to two decimal places.")
    assert result.status == "success" and sorted(result.answer.round(2).tolist()) == [-1.0, 1.67]


def test_a_run_that_ends_on_prose_after_its_answer_was_held_ends_with_that_answer(sales):
    # DABench 690: 2.29 and 1.15 held for their decimals, restated in prose; the prose became the answer (no_code)
    task = "What is the mean of units, rounded to two decimal places?"
    first = code("final_answer(float(sales.units.mean()) + 1/3)")
    result = agent_with([first, "The mean is 2.83.", "It is 2.83, as computed."], sales).run(task)
    assert result.status == "failed_checks" and result.answer == 2.83  # the held answer, in the form asked
    assert "ended on a reply without code; its last answer (held for: form) stands" in result.trajectory.error
    plain = agent_with(["The mean is about 3."]).run(task)  # nothing was held: the prose is the answer
    assert plain.status == "no_code" and plain.answer == "The mean is about 3."


def test_a_run_that_reaches_max_steps_after_its_answer_was_held_ends_with_that_answer(sales):
    # the summary at max_steps is prose: the held answer, not the summary, is what the run returns
    task = "What is the mean of units, rounded to two decimal places?"
    replies = [code("final_answer(float(sales.units.mean()) + 1/3)"), code("x = sales.nope"), "I could not finish."]
    result = agent_with(replies, sales, max_steps=2).run(task)
    assert result.status == "failed_checks" and result.answer == 2.83
    assert "the run reached max_steps; its last answer (held for: form) stands" in result.trajectory.error


def test_final_answer_named_in_prose_after_blocks_that_ran_is_run_for_the_model(sales):
    # development tasks: "The `final_answer(total_spend)` function is called with the result", then the table in
    # prose; "then you can call `final_answer(revenue_per_month)`", twice, until max_steps
    reply = "```python\ntotal = int(sales.units.sum())\nprint(total)\n```\nThe `final_answer(total)` is called."
    result = agent_with([reply, code("final_answer(0)")], sales).run("Total units?")
    assert result.status == "success" and result.answer == int(sales.units.sum())
    (step,) = result.trajectory.steps
    assert step.meta["prose_call_run"] == "total" and step.code.endswith("final_answer(total)")
    assert "it was run for you" in step.observation and "Read the error above" not in step.observation


def test_final_answer_named_in_prose_goes_through_the_review_like_any_answer(sales):
    task = "What is the mean of units, rounded to two decimal places?"
    reply = "```python\nm = float(sales.units.mean()) + 1/3\n```\nThen I call `final_answer(m)`."
    result = agent_with([reply, code("final_answer(2.5)")], sales).run(task)
    first = result.trajectory.steps[0]
    assert first.meta["prose_call_run"] == "m" and "Not accepted yet" in first.observation
    assert result.status == "success" and result.answer == 2.5


def test_final_answer_named_in_prose_is_not_run_after_a_failing_block(sales):
    failing = "```python\ntotal = sales.nope.sum()\n```\nThen you can call `final_answer(total)`."
    result = agent_with([failing, code("total = 10\nfinal_answer(total + 1)")], sales).run("Total units?")
    assert not any(s.meta.get("prose_call_run") for s in result.trajectory.steps)
    assert result.status == "success" and result.answer == 11


def test_a_table_sent_where_the_task_asks_for_an_integer_comes_back(sales):
    # DABench 740: the outlier rows sent for "outliers_count" is an integer, `success`
    task = (
        'How many orders have more than 3 units? Answer format: @big[big_count], where "big_count" is an integer.'
        " Call final_answer({'big': ...})"
    )
    rows = code("final_answer({'big': sales[sales.units > 3]})")
    result = agent_with([rows, code("final_answer({'big': len(sales[sales.units > 3])})")], sales).run(task)
    assert "'big' is a table of" in result.trajectory.steps[0].observation
    assert "the task asks for an integer (for a count of rows: len(...))" in result.trajectory.steps[0].observation
    assert result.status == "success" and result.answer == {"big": int((sales.units > 3).sum())}


def test_none_from_a_call_that_works_in_place_comes_back_with_the_line_that_keeps_the_result():
    # a dev probe: `hotels = list(groups.keys()).sort()` is None, sent as the answer twice, then failed_checks
    stays = pd.DataFrame({"hotel": ["Inn", "Plaza", "Inn", "Lodge"], "status": ["no-show", "ok", "no-show", "no-show"]})
    slip = code("hotels = list(stays[stays.status == 'no-show']['hotel'].unique()).sort()\nfinal_answer(hotels)")
    fixed = code("hotels = sorted(list(stays[stays.status == 'no-show']['hotel'].unique()))\nfinal_answer(hotels)")
    result, first = ran([slip, fixed], "List the hotels that had at least one no-show, alphabetically.", stays=stays)
    assert "set hotels to None: .sort() changes the object in place and returns None" in first
    assert "hotels = sorted(list(stays[stays.status == 'no-show']['hotel'].unique()))" in first
    assert result.status == "success" and result.answer == ["Inn", "Lodge"]


def test_a_value_looked_up_as_a_row_label_gets_the_line_without_the_lookup():
    # a development run: the product that rose most was already in `top` (an idxmax over a Series indexed by
    # product), and `sales['product'][top]` / `sales.loc[top, 'product']` raised KeyError: 'monitor' four times
    sales = pd.DataFrame(
        {"product": ["phone", "monitor", "phone", "monitor"], "q": [1, 1, 2, 2], "units": [5, 1, 6, 9]}
    )
    cell = (
        "t = sales.pivot_table(index='product', columns='q', values='units', aggfunc='sum')\n"
        "top = (t[2] - t[1]).idxmax()\nname = sales['product'][top]"
    )
    model = Scripted([code(cell), code("name = top\nfinal_answer(name)")])
    agent = Agent(model=model, runtime=InProcessRuntime())
    agent.runtime.inject("sales", sales)
    result = agent.run("Which product rose most from Q1 to Q2?")
    assert result.answer == "monitor"
    note = result.trajectory.steps[0].observation
    assert "'monitor' is a value of sales['product'], not a row label of sales" in note
    assert "```python\nname = top\n```" in note
    # the same lookup by .loc gets the same line
    model = Scripted(
        [code(cell.replace("sales['product'][top]", "sales.loc[top, 'product']")), code("final_answer(top)")]
    )
    agent = Agent(model=model, runtime=InProcessRuntime())
    agent.runtime.inject("sales", sales)
    result = agent.run("Which product rose most from Q1 to Q2?")
    assert "```python\nname = top\n```" in result.trajectory.steps[0].observation


def test_a_column_named_like_a_dataframe_method_gets_the_line_with_brackets():
    # a development run: sales[...].product.max() read DataFrame.product(), "'function' object has no attribute
    # 'max'" three times; the traceback pointed into the runtime's own wrapper of .max()
    sales = pd.DataFrame({"product": ["phone", "monitor"], "units": [5, 9]})
    cell = "top = sales[sales.units > 6].product.max()"
    fixed = code("top = sales[sales.units > 6]['product'].max()\nfinal_answer(top)")
    agent = Agent(model=Scripted([code(cell), fixed], repeat_last=True), runtime=InProcessRuntime())
    agent.runtime.inject("sales", sales)
    result = agent.run("Which product sold more than 6 units?")
    assert result.answer == "monitor"
    observation = result.trajectory.steps[0].observation
    assert "'function' object has no attribute 'max'" in observation and "matches.py" not in observation
    assert "`.product` is a DataFrame method, not the column 'product'" in observation
    assert "```python\ntop = sales[sales.units > 6]['product'].max()\n```" in observation


def test_a_cell_of_printed_rows_is_told_it_is_not_code(sales):
    # a development run wrote the first rows it had been shown into a code block, twice: a SyntaxError about
    # leading zeros, which named nothing it could act on
    rows = "   region  units\n0       N      1\n1       S      2"
    model = Scripted([code(rows), code("final_answer(int(sales.units.sum()))")])
    agent = Agent(model=model, runtime=InProcessRuntime())
    agent.runtime.inject("sales", sales)
    result = agent.run("How many units were sold?")
    assert result.answer == 10
    assert "This cell is a table's printed rows, not Python code" in result.trajectory.steps[0].observation
    assert "print(sales.head())" in result.trajectory.steps[0].observation
