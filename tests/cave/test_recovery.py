"""cave.review.recovery on hand-built trajectories: what the loop says when the model goes wrong, without a model."""

from __future__ import annotations

from cave.runtimes.base import ExecError, Execution, VariableInfo

from cave import prompts
from cave.review import failure_notes, prose, recovery
from cave.trajectory import Step, Trajectory

BAD = "df[df['year'] == 1992]"
KEY_ERROR = ExecError("KeyError", "'year'", lineno=1)


def ran(i: int, code: str, error: ExecError | None = None, **meta) -> Step:
    return Step(index=i, code=code, execution=Execution(error=error), meta=meta)


def prose_step(i: int) -> Step:
    return Step(index=i, completion="The table has no year column.")


def test_a_repeat_of_the_failing_cell_is_seen_across_a_prose_reply():
    traj = Trajectory(steps=[ran(0, BAD, KEY_ERROR), prose_step(1)])
    assert recovery.last_code_step(traj).index == 0 and recovery.last_action(traj).index == 1
    assert recovery.repeats_failure(traj, [BAD])
    assert not recovery.repeats_failure(traj, ["df.columns"])
    assert not recovery.repeats_failure(Trajectory(steps=[ran(0, BAD)]), [BAD])  # it worked: repeating is fine
    refused = ran(0, "final_answer(1)", checks=["answer: expected int"])
    refused.meta["blocks"] = [{"checks": ["answer: expected int"]}]
    assert recovery.repeats_failure(Trajectory(steps=[refused]), ["final_answer(1)"])  # ran, but failed its checks
    held = ran(0, "final_answer(df['n'].max())")
    held.meta["blocks"] = [{"final": True, "held": "tie"}]
    assert recovery.repeats_failure(Trajectory(steps=[held]), ["final_answer(df['n'].max())"])  # echoed, not confirmed
    assert not recovery.repeats_failure(Trajectory(steps=[held]), ["final_answer(_final_answer)"])  # the confirmation
    held.meta["blocks"] = [{"final": True, "held": "contract"}]  # its note: "send it again unchanged" confirms
    assert not recovery.repeats_failure(Trajectory(steps=[held]), ["final_answer(df['n'].max())"])


def test_prose_is_refused_after_an_error_and_before_any_code_and_taken_after_two_refusals():
    after_error = Trajectory(steps=[ran(0, BAD, KEY_ERROR)])
    kw = dict(checks=False, insist_on_code=True, given=True)
    assert prose.prose_refusal(after_error, **kw) == prompts.PROSE_AFTER_ERROR_NOTE
    assert prose.prose_refusal(Trajectory(), **kw) == prompts.PROSE_UNCHECKED_NOTE
    assert prose.prose_refusal(Trajectory(), **{**kw, "given": False}) is None  # nothing to look at first
    assert prose.prose_refusal(Trajectory(steps=[ran(0, "df.shape")]), **kw) is None  # it looked: prose can end it
    after_error.meta["prose_refused"] = prose.PROSE_REFUSALS
    assert prose.prose_refusal(after_error, **kw) is None
    assert prose.prose_refusal(after_error, **{**kw, "checks": True}) == prompts.NEED_OBJECTS_NOTE


def test_the_loop_note_names_the_line_and_the_real_columns():
    infos = [VariableInfo("df", "pandas.DataFrame", preview="DataFrame 5x3; country: str, gdp_1992: float64")]
    records = [{"code": BAD}]
    first = ran(0, BAD, KEY_ERROR)
    note = failure_notes.loop_note(Trajectory(), first, records, infos)  # the first time: the columns, no "same error"
    assert note.startswith("The objects on the failing line really are: df: pandas.DataFrame") and "gdp_1992" in note
    note = failure_notes.loop_note(Trajectory(steps=[first, prose_step(1)]), ran(2, BAD, KEY_ERROR), records, infos)
    assert "same error as in your previous 1 steps" in note and f"`{BAD}`" in note and "gdp_1992" in note
    other = ran(0, "1/0", ExecError("ZeroDivisionError", "division by zero", lineno=1))
    assert (
        failure_notes.loop_note(Trajectory(), other, [{"code": "1/0"}], infos) is None
    )  # once, and not a key: no note


def test_a_pandas_method_on_a_numpy_array_gets_the_line_written_for_the_array_at_once():
    # DABench 724 on main: df[z_scores.abs() > 3] on scipy's zscore four times, to max_steps
    code = "z_scores = stats.zscore(df['acceleration'])\noutliers = df[z_scores.abs() > 3]"
    error = ExecError(
        "AttributeError", "'numpy.ndarray' object has no attribute 'abs'. A ndarray has: T, all", lineno=2
    )
    infos = [VariableInfo("z_scores", "numpy.ndarray", preview="array shape (392,) dtype float64")]
    first = ran(0, code, error)
    note = failure_notes.loop_note(Trajectory(), first, [{"code": code}], infos)
    assert (
        "z_scores: numpy.ndarray" in note
        and "```python\nimport numpy as np\noutliers = df[np.abs(z_scores) > 3]\n```" in note
    )
    again = failure_notes.loop_note(Trajectory(steps=[first]), ran(1, code, error), [{"code": code}], infos)
    assert "same error as in your previous 1 steps" in again and "written for a NumPy array" in again
    assert "np.abs(z_scores)" in again and "real column name" not in again


def test_an_index_into_a_tests_single_statistic_gets_the_line_that_computes_what_the_name_says():
    # DABench 647: price_range_mean = round(shapiro_result.statistic[0], 2), six times, to max_steps
    code = "shapiro_result = shapiro(df['Price Range'])\nprice_range_mean = round(shapiro_result.statistic[0], 2)"
    error = ExecError("IndexError", "invalid index to scalar variable.", lineno=2)
    note = failure_notes.loop_note(Trajectory(), ran(0, code, error), [{"code": code}], [])
    assert "```python\nprice_range_mean = round(df['Price Range'].mean(), 2)\n```" in note
    other = ExecError("IndexError", "list index out of range", lineno=1)
    assert failure_notes.loop_note(Trajectory(), ran(0, "x = [][0]", other), [{"code": "x = [][0]"}], []) is None


def test_a_selection_by_a_missing_column_of_what_the_whole_table_is_about_is_dropped():
    # DABench 578: df[df['Symbol'] == 'AAPL'] on e5_aapl.csv (no symbol column), guarded and printed to max_steps
    import pandas as pd

    from cave.agent import Agent
    from cave.llm.base import Scripted

    code = "aapl = df[df['Symbol'] == 'AAPL']\nfinal_answer({'mean_volume': round(aapl['Volume'].mean(), 2)})"
    agent = Agent(
        model=Scripted([f"```python\n{code}\n```", "```python\naapl = df\n```"]), runtime="inprocess", max_steps=1
    )
    agent.runtime.inject("df", pd.DataFrame({"Date": ["2020-01-01", "2020-01-02"], "Volume": [10, 20]}))
    note = agent.run("What is the average trading volume of AAPL stock?").trajectory.steps[0].observation
    assert "df has no 'Symbol' column to select 'AAPL' by" in note and "```python\naapl = df\n```" in note
    # a table that holds the value in another column needs that column: no note
    agent = Agent(model=Scripted([f"```python\n{code}\n```"]), runtime="inprocess", max_steps=1)
    agent.runtime.inject("df", pd.DataFrame({"Ticker": ["AAPL", "MSFT"], "Volume": [10, 20]}))
    note = agent.run("What is the average trading volume of AAPL stock?").trajectory.steps[0].observation
    assert "to select 'AAPL' by" not in note


def test_arithmetic_on_durations_or_numbers_written_as_text_gets_the_conversion_to_run():
    # DABench 588: df['avg. wait time'].mean() on '00:00:51'; the numeric-columns hint dropped the column asked about
    import pandas as pd

    from cave.agent import Agent
    from cave.llm.base import Scripted

    calls = pd.DataFrame({"avg. wait time ": ["00:00:51", "00:01:02", None], "sold": ["1,204", "$35", "12%"]})
    code = "z = (df['avg. wait time'] - df['avg. wait time'].mean()) / df['avg. wait time'].std()"
    agent = Agent(model=Scripted([f"```python\n{code}\n```", "done"]), runtime="inprocess", max_steps=1)
    agent.runtime.inject("df", calls)
    note = agent.run("How many outliers has the average wait time?").trajectory.steps[0].observation
    assert "df['avg. wait time '] holds durations written as text ('00:00:51')" in note
    fix = "df['avg. wait time '] = pd.to_timedelta(df['avg. wait time ']).dt.total_seconds()"
    assert f"```python\n{fix}\n```" in note
    agent = Agent(model=Scripted(["```python\nm = df['sold'].mean()\n```", "done"]), runtime="inprocess", max_steps=1)
    agent.runtime.inject("df", calls)
    note = agent.run("What is the mean of sold?").trajectory.steps[0].observation
    assert "df['sold'] holds numbers written as text ('1,204')" in note
    ns: dict = {"pd": pd, "df": calls.copy()}
    exec(note.split("```python\n")[1].split("\n```")[0], ns)  # the line runs and gives numbers
    assert ns["df"]["sold"].tolist() == [1204.0, 35.0, 12.0]


def test_the_features_note_names_a_ticker_column_by_the_stem_the_task_writes():
    # DABench 574: the task writes (MSFT), the column is 'MSFT.O'; the note left it out of the features
    import pandas as pd

    df = pd.DataFrame({"Date": ["2010-01-04"], "MSFT.O": [30.9], "SPY": [113.3], ".VIX": [20.0], "AAPL.O": [30.5]})
    error = ExecError(
        "ValueError", "could not convert string to float: '2010-01-04'. '2010-01-04' is in df['Date'], a text column."
    )
    step = Step(index=0, code="scaler.fit_transform(df)", execution=Execution(error=error))
    task = "Normalize the prices of Microsoft (MSFT), the S&P 500 ETF (SPY) and the Volatility Index (.VIX)."
    note = failure_notes.features_note(task, step, {"df": df})
    assert "X = df[['MSFT.O', 'SPY', '.VIX']]" in note


def test_a_copy_of_the_folded_stub_is_never_the_answer():
    # a small model imitates the stub that replaced its failing cell; past the refusal limit it is still refused
    traj = Trajectory(task="t")
    traj.meta["prose_refused"] = prose.PROSE_REFUSALS
    stub = prompts.FOLDED_NOTE.format(error="ValueError: Encountered all NA values")
    refusal = prose.prose_refusal(traj, checks=False, insist_on_code=True, given=True, text=stub)
    assert refusal == prompts.PROSE_AFTER_ERROR_NOTE
    assert prose.prose_refusal(traj, checks=False, insist_on_code=True, given=True, text="It is 4.") is None
