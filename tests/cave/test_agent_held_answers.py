"""Answers that look done and are not: values typed in that the code's own variables contradict, a printed guess
taken as output, a cell's note that sits in an earlier block (or the previous step) than the answer, the largest
of a text column, a 'not' group picked from the yes group, and a statistic computed by another one's function.

Each is held once with what to do, and sent again as it was it ends ``failed_checks``, not ``success``. Driven by
the Scripted backend against a real InProcessRuntime; the cases are the DABench dev questions named.
"""

from __future__ import annotations

import functools

import pandas as pd
import pytest
from cave.runtimes.inprocess import InProcessRuntime
from cave.runtimes.kernel import KernelRuntime

from cave.agent import Agent as _Agent
from cave.llm.base import Scripted

# These tests are about the holds an answer goes through; verification by agreement is tested in
# test_verify.py. Here the caller verifies (verify=None), so an accepted answer ends `success` as a role's turn does.
Agent = functools.partial(_Agent, verify=None)


def code(*blocks: str) -> str:
    return "I will do it.\n" + "\n".join(f"```python\n{b}\n```" for b in blocks)


@pytest.fixture
def sites() -> pd.DataFrame:
    return pd.DataFrame({"site": ["57", "99", "HA2", "121"], "score": [9.031, 1.5, 2.25, 9.0]})


def run(replies: list[str], table: pd.DataFrame, task: str, **kw):
    agent = Agent(model=Scripted(replies, repeat_last=True), runtime=InProcessRuntime(), **kw)
    agent.runtime.inject("df", table)
    return agent.run(task)


OUTLIERS = "Which sites are outliers (score above 5)? @sites[...] @values[...] rounded to 2 decimals."


def test_a_printed_guess_is_no_output_and_the_variable_it_contradicts_holds_the_answer(sites):
    # DABench 219: the model printed a string it made up ("[9.03, 9.00, 8.42]"), typed those numbers into the
    # answer, was told they were typed, and sent them again alone: `success` with a value the code never computed
    work = (
        "out = df[df.score > 5]\nsites = out.site.tolist()\nvalues = [round(v, 2) for v in out.score]\n"
        'print("@sites[57, 121, 280] @values[9.03, 9.00, 8.42]")'
    )
    typed = "final_answer({'sites': ['57', '121', '280'], 'values': [9.03, 9.00, 8.42]})"
    result = run([code(work, typed), code(typed), code(typed)], sites, OUTLIERS)
    first, second = (s.observation for s in result.trajectory.steps[:2])
    assert "numbers typed in (9.03, 9.00, 8.42)" in first
    assert "'values' is [9.03, 9.00, 8.42], but your variable `values` holds [9.03, 9.0]" in second
    assert "final_answer({'sites': sites, 'values': values})" in second
    assert result.status == "failed_checks" and result.answer == {
        "sites": ["57", "121", "280"],
        "values": [9.03, 9.0, 8.42],
    }
    assert "typed in that no computed output shows" in result.trajectory.error
    fixed = run(
        [code(work, typed), code(typed), code("final_answer({'sites': sites, 'values': values})")], sites, OUTLIERS
    )
    assert fixed.status == "success" and fixed.answer == {"sites": ["57", "121"], "values": [9.03, 9.0]}


def test_typed_values_that_agree_with_the_variables_stand(sites):
    # rounded, as a percentage, in another case: the same result as the variable of that name
    work = "mean = df.score.mean()\nshare = (df.score > 5).mean()\nlabel = 'High'\nprint(mean, share, label)"
    answer = "final_answer({'mean': 5.45, 'share': 50.0, 'label': 'high'})"
    result = run([code(work), code(answer)], sites, "Mean score, share above 5 (%), and the label?")
    assert result.status == "success" and len(result.trajectory.steps) == 2


def test_a_note_from_an_earlier_block_or_the_previous_step_holds_the_answer_that_copies_it():
    # DABench 109: a t-test over NaN in block 1 (its note), typed values in block 2 (held for that first), then the
    # printed values sent alone: the NaN note was in neither answer cell, and "no significant" stood as `success`
    table = pd.DataFrame({"grad": ["G", "N"] * 4, "loan": [1.0, 2.0, None, 4.0, 5.0, 6.0, 7.0, 9.0]})
    work = (
        "from scipy.stats import ttest_ind\np = ttest_ind(df[df.grad == 'G'].loan, df[df.grad == 'N'].loan).pvalue\n"
        "verdict = 'significant' if p < 0.05 else 'no significant'\nprint(verdict)"
    )
    task = "Do loans differ by grad (t-test, alpha 0.05)? @significance[significant/no significant] @mean[...]"
    typed = "final_answer({'significance': 'no significant', 'mean': 4.86})"
    replies = [code(work, typed), code("final_answer({'significance': 'no significant', 'mean': 4.86})")] * 2
    result = run(replies, table, task)
    steps = result.trajectory.steps
    # the data the answer came from is held first (its note is in block 1, the answer in block 2); the same
    # verdict sent again alone, with no note of its own cell, still rests on it
    assert "this answer rests on a scipy.stats call that returned nan" in steps[0].observation
    assert result.status == "failed_checks" and "returned nan over missing values" in result.trajectory.error


def test_the_largest_of_a_text_column_is_held_and_iso_dates_are_not(sites):
    # DABench 217: "the site with the highest positive_diffsel" answered df['site'].max(), '99' (alphabetical)
    task = "Which site has the highest score?"
    result = run([code("final_answer(df['site'].max())")] * 2, sites, task)
    assert "the alphabetically last of its values" in result.trajectory.steps[0].observation
    assert (
        "Not accepted yet: this answer came from .max()/.min() of a text column"
        in result.trajectory.steps[0].observation
    )
    assert result.status == "failed_checks" and result.answer == "HA2"
    fixed = run(
        [code("final_answer(df['site'].max())"), code("final_answer(df.loc[df.score.idxmax(), 'site'])")], sites, task
    )
    assert fixed.status == "success" and fixed.answer == "57"
    days = pd.DataFrame({"day": ["2025-01-03", "2025-02-11", "2024-12-30"]})
    latest = run([code("final_answer(df['day'].max())")], days, "The latest day?")
    assert latest.status == "success" and latest.answer == "2025-02-11"  # ISO dates sort as text the way they sort


def test_a_not_group_picked_from_the_yes_group_is_held():
    # DABench 247: means.iloc[0] sent as the eligible players and .iloc[1] as the not eligible: swapped, `success`
    table = pd.DataFrame({"eligible": [1, 0, 1, 0], "runs": [60, 40, 50, 30]})
    swapped = (
        "m = df.groupby('eligible')['runs'].mean()\neligible_runs = m.iloc[0]\nnot_eligible_runs = m.iloc[1]\n"
        "final_answer({'eligible_runs': eligible_runs, 'not_eligible_runs': not_eligible_runs})"
    )
    task = "Average runs of eligible and of not eligible players?"
    result = run([code(swapped)] * 2, table, task)
    first = result.trajectory.steps[0].observation
    assert "`not_eligible_runs` names the 'not' group, and 1 usually means yes: the 'not' group is .loc[0]" in first
    assert "Not accepted yet: a value named for the 'not' group" in first
    assert result.status == "failed_checks"
    by_label = "final_answer({'eligible_runs': m.loc[1], 'not_eligible_runs': m.loc[0]})"
    fixed = run([code(swapped), code(by_label)], table, task)
    assert fixed.status == "success" and fixed.answer == {"eligible_runs": 55.0, "not_eligible_runs": 35.0}


def test_a_statistic_computed_by_another_ones_function_is_held(sites):
    # DABench 222: skew(x, fisher=True) raised twice, then `skewness_value = kurtosis(...)`: -0.3 for 0.14, `success`
    task = "Skewness and kurtosis (Fisher's) of score. @skewness_value[...] @kurtosis_value[...]"
    failing = code("from scipy.stats import skew\ns = skew(df.score, fisher=True)")
    swapped = code(
        "from scipy.stats import kurtosis\nskewness_value = kurtosis(df.score)\n"
        "kurtosis_value = kurtosis(df.score, fisher=False)\n"
        "final_answer({'skewness_value': skewness_value, 'kurtosis_value': kurtosis_value})"
    )
    right = code(
        "from scipy.stats import skew, kurtosis\n"
        "final_answer({'skewness_value': skew(df.score), 'kurtosis_value': kurtosis(df.score)})"
    )
    result = run([failing, swapped, right], sites, task)
    hint, held = (s.observation for s in result.trajectory.steps[:2])
    assert "skew() has no 'fisher' argument; it takes (a, axis=0, bias=True" in hint
    assert "`skewness_value = kurtosis(df.score)` computes kurtosis, not skew" in held
    assert "is Pearson's kurtosis; the task asks for Fisher's" in held
    assert result.status == "success" and len(result.trajectory.steps) == 3


def test_doctests():
    import doctest

    from cave.runtimes import suggest

    import cave.review.typed

    for module in (cave.review.typed, suggest):
        result = doctest.testmod(module)
        assert result.attempted > 0 and result.failed == 0, module.__name__


def test_right_numbers_sent_again_unrounded_end_in_the_form_the_task_asks(sites):
    # DABench 64, 125, 216, 271, 273: held for "two decimal places", the model sent the same 6.306690 again and the
    # run ended failed_checks with an answer that exact match scores wrong; the rounding is mechanical
    task = "Mean and std of score, rounded to two decimal places. Is the mean above 5? Yes or No."
    unrounded = "final_answer({'mean': df.score.mean(), 'std': df.score.std(), 'above': bool(df.score.mean() > 5)})"
    result = run([code(unrounded)] * 2, sites, task)
    assert "the task asks for 2 decimal places: 5.45" in result.trajectory.steps[0].observation
    assert result.status == "success" and result.answer == {"mean": 5.45, "std": 4.13, "above": "Yes"}
    assert "'mean' is 5.4452" in result.trajectory.meta["form_settled"][0]
    # only what the form check fixes: an answer that still misses a key the task spells out is not settled
    keys = "Call final_answer({'mean': ..., 'median': ...}) with the mean rounded to two decimal places."
    missing = run([code("final_answer({'mean': df.score.mean()})")] * 2, sites, keys)
    assert missing.status == "failed_checks" and missing.answer == {"mean": 5.44525}


def test_numbers_lost_to_a_coercion_come_back_with_the_code_that_keeps_them():
    # DABench 55-59: '630308[495000-801000]' coerced to NaN, held, and the same lossy line sent again: the note now
    # carries the model's own code with the number in each value kept
    table = pd.DataFrame({"cases": ["630308[495000-801000]", "120", "32924[30000-36000]", None]})
    lossy = "df['cases'] = pd.to_numeric(df['cases'], errors='coerce')\nfinal_answer(round(df['cases'].mean()))"
    kept = (
        "df['cases'] = pd.to_numeric(df['cases'].astype(str).str.replace(',', '')"
        ".str.extract(r'(-?\\d+(?:\\.\\d+)?)')[0], errors='coerce')\nfinal_answer(round(df['cases'].mean()))"
    )
    replies = [code("import pandas as pd\n" + lossy), code("import pandas as pd\n" + kept)]
    with KernelRuntime(timeout=30) as runtime:  # a kernel: the host keeps the table as it was given
        agent = Agent(model=Scripted(replies, repeat_last=True), runtime=runtime)
        agent.runtime.inject("df", table)
        result = agent.run("Mean cases?")
    note = result.trajectory.steps[0].observation
    assert "`df` had been changed by earlier code" in note  # the lossy line wrote into it: back as given
    assert "Your code with the number in each value kept (run it):\n```python\nimport pandas as pd\n" + kept in note
    assert note.index("number in each value kept") < note.index("final_answer(_final_answer)")  # the fix first
    assert result.status == "success" and result.answer == 221117


def test_pandas_moments_where_the_task_asks_for_scipy_are_held_and_rounding_them_is_no_fix(sites):
    # DABench 375: "For skewness and kurtosis use Python's scipy library"; pandas' bias-corrected .skew() (0.1546)
    # was sent, held, and sent again typed at four decimals: still pandas' number, so not a success
    task = "Skewness of score. Use Python's scipy library for skewness. @skewness[value] to four decimal places."
    pandas_skew = code("final_answer({'skewness': df.score.skew()})")
    typed = code(f"final_answer({{'skewness': {round(float(sites.score.skew()), 4)}}})")
    result = run([pandas_skew, typed], sites, task)
    assert "the code uses pandas'" in result.trajectory.steps[0].observation
    assert result.status == "failed_checks" and "still misreads" in result.trajectory.error
    scipy_skew = code("from scipy.stats import skew\nfinal_answer({'skewness': round(float(skew(df.score)), 4)})")
    assert run([pandas_skew, scipy_skew], sites, task).status == "success"


def test_a_guess_printed_in_an_earlier_block_of_the_answering_reply_is_no_output_either(sites):
    work = "out = df[df.score > 5]\nvalues = [round(v, 2) for v in out.score]"
    typed = "final_answer({'values': [9.03, 9.00, 8.42]})"
    again = code('print("values: 9.03, 9.00, 8.42")', typed)  # the guess printed, then typed, in one reply
    result = run([code(work, typed), again, again], sites, OUTLIERS)
    assert result.status == "failed_checks"
    assert "typed in that no computed output shows: ['9.03', '9.00', '8.42']" in result.trajectory.error


def test_numbers_from_the_models_own_prose_sent_alone_are_held_and_cannot_stand(sites):
    # DABench 412: code that printed nothing, "The final answer is: @m[2.00]" written beside it, then
    # final_answer({'m': 2.00}) alone (the mean was 0.94): `success`
    task = "Mean score of sites with a score above 5? @m[mean] rounded to two decimals."
    work = "I will compute it.\n```python\nm = df[df.score > 5].score.mean()\n```\nThe final answer is: @m[2.00]"
    guess = code("final_answer({'m': 2.00})")
    result = run([work, guess, guess, guess], sites, task)
    assert "numbers typed in (2.00)" in result.trajectory.steps[1].observation
    assert result.status == "failed_checks"
    fixed = run([work, guess, code("final_answer({'m': round(m, 2)})")], sites, task)
    assert fixed.status == "success" and fixed.answer == {"m": 9.02}
    shown = "I will compute it.\n```python\nm = df[df.score > 5].score.mean()\nprint(round(m, 2))\n```\nIt is 9.02"
    copied = run([shown, code("final_answer({'m': 9.02})")], sites, task)  # copied from the output: it stands
    assert copied.status == "success" and len(copied.trajectory.steps) == 2


def test_a_typed_dict_run_alone_is_no_output_and_its_numbers_sent_alone_cannot_stand(sites):
    # DABench 300: the test returned nan, the model ran "The final answer is:" and a typed dict as a cell of its
    # own (Out: {...} echoed its guess), then sent that dict alone: `success` with made-up numbers
    task = "Mean score of sites with a score above 5? @mean_high[mean] rounded to two decimals."
    work = "I will compute it.\n```python\nm = df[df.score > 5].score.mean()\n```\nThe final answer is:\n```python\n{'mean_high': 2.00}\n```"
    guess = code("final_answer({'mean_high': 2.00})")
    result = run([work, code("{'mean_high': 2.00}"), guess, guess], sites, task)
    assert "numbers typed in (2.00)" in result.trajectory.steps[2].observation
    assert result.status == "failed_checks"
    shown = "I will compute it.\n```python\nm = df[df.score > 5].score.mean()\nprint(round(m, 2))\n```"
    copied = run(
        [shown, code("{'mean_high': 9.02}"), code("final_answer({'mean_high': 9.02})")], sites, task
    )  # from the output
    assert copied.status == "success" and copied.answer == {"mean_high": 9.02}


def test_a_skew_direction_against_the_sign_of_the_computed_skewness_is_held_and_cannot_stand():
    # DABench 465: skew() gave -0.53, the form hold asked for a word, the answer typed 'skewed_right': `success`
    ages = pd.DataFrame({"age": [1.0, 8.0, 9.0, 9.0, 10.0]})
    task = "Is age skewed? @distribution_skew[word] one of 'symmetric', 'skewed_right', 'skewed_left'."
    typed = code(
        "from scipy.stats import skew\nskewness = skew(df['age'])\nfinal_answer({'distribution_skew': 'skewed_right'})"
    )
    result = run([typed, typed], ages, task)
    assert "your variable `skewness` is -1.3" in result.trajectory.steps[0].observation
    assert result.status == "failed_checks"
    fixed = run([typed, typed.replace("skewed_right", "skewed_left")], ages, task)
    assert fixed.status == "success" and fixed.answer == {"distribution_skew": "skewed_left"}


def test_a_series_where_the_task_writes_a_dict_is_held_with_the_dict_under_the_tasks_keys():
    # DABench 451: df.isnull().sum() sent for @missing[{'DATE TIME':val_1, 'WINDSPEED':val_2}], the frame's names
    # with a space in front (' WINDSPEED'): `success`, in a form no reader of the task's format gets
    table = pd.DataFrame({"DATE TIME": ["a", "b"], " WINDSPEED": [1.0, None]})
    task = "Missing values per column? @missing[{'DATE TIME':val_1, 'WINDSPEED':val_2}]"
    sent = code("m = df.isnull().sum()\nfinal_answer({'missing': m})")
    result = run([sent, code("final_answer(_final_answer)")], table, task)
    note = result.trajectory.steps[0].observation
    assert "'missing' is a pandas Series; the task writes it as a dict" in note
    assert "final_answer({'missing': {'DATE TIME': 0, 'WINDSPEED': 1}})" in note
    fixed = run([sent, code("final_answer({'missing': {'DATE TIME': 0, 'WINDSPEED': 1}})")], table, task)
    assert fixed.status == "success" and fixed.answer == {"missing": {"DATE TIME": 0, "WINDSPEED": 1}}


def test_typed_numbers_from_an_unpacked_test_get_the_call_with_its_variables_and_the_typed_verdict_kept(sites):
    # DABench 668: r and p unpacked from pearsonr, 0.85 and 0.0001 typed beside a typed True; the note gave no call,
    # and the model sent the numbers without the verdict twice
    typed = code(
        "from scipy.stats import pearsonr\nr, p_value = pearsonr(df.score, df.score ** 2)\n"
        "final_answer({'r': 0.85, 'p_value': 0.0001, 'significant': True})"
    )
    result = run(
        [typed, code("final_answer({'r': round(r, 2), 'p_value': round(p_value, 4), 'significant': True})")],
        sites,
        "r, p?",
    )
    assert (
        "```python\nfinal_answer({'r': r, 'p_value': p_value, 'significant': True})\n```"
        in result.trajectory.steps[0].observation
    )


def test_one_value_sent_as_several_statistics_is_held_and_cannot_stand(sites):
    # DABench 375: told to use scipy's skewness and kurtosis, the model set both to the Shapiro W (0.9543), was
    # held for the decimals only, and sent them rounded: `success`
    task = "Shapiro-Wilk W and p of score, and its skewness and kurtosis (scipy), each to four decimal places."
    same = code(
        "from scipy.stats import shapiro\nw, p = shapiro(df.score)\n"
        "final_answer({'shapiro_w': w, 'p_value': p, 'skewness': w, 'kurtosis': w})"
    )
    result = run([same, same], sites, task)
    assert "'shapiro_w', 'skewness', 'kurtosis' are different statistics with the same value" in (
        result.trajectory.steps[0].observation
    )
    assert result.status == "failed_checks"


def test_a_dict_the_task_asks_for_is_no_whole_table_warning_and_dropping_its_name_is_held(sites):
    # DABench 451: @missing_values_per_column[{'site': v1, ...}]: the per-column counts were right, a review warned
    # "a whole table, not one value", and the model sent the inner dict without the name: `success`, scored wrong
    task = (
        "How many missing values per column? Answer format: @missing_values_per_column[{'site':val_1, 'score':val_2}]"
        " Call final_answer with a dict of the answers: final_answer({'missing_values_per_column': ...})"
    )
    right = code("m = df.isnull().sum()\nfinal_answer({'missing_values_per_column': m})")
    inner = code("final_answer(m.to_dict())")
    result = run([right, code("final_answer(_final_answer)")], sites, task, review=True)
    assert "whole table" not in result.trajectory.steps[0].observation
    assert result.status == "success" and list(result.answer) == ["missing_values_per_column"]
    dropped = run([right, inner, inner], sites, task, review=True)
    assert "the answer has no 'missing_values_per_column'" in dropped.trajectory.steps[1].observation
    assert dropped.status == "failed_checks"


def test_an_empty_table_as_a_named_answer_and_a_number_for_listed_words_are_held(sites):
    # DABench 450: an empty Series sent as the monthly means; 465: the skewness itself for "skewed_left"
    empty = code("final_answer({'monthly': df[df.score > 100].score})")
    result = run([empty, empty], sites, "Mean score per month? @monthly[{'month_1': avg_1, ...}]")
    assert "'monthly' is empty" in result.trajectory.steps[0].observation and result.status == "failed_checks"
    task = '@shape[skewness] where "skewness" is a string that can be "symmetric", "skewed_right", or "skewed_left".'
    number = code("from scipy.stats import skew\nfinal_answer({'shape': skew(df.score)})")
    word = code(
        "s = skew(df.score)\nfinal_answer({'shape': 'symmetric' if abs(s) <= 0.5 else 'skewed_right' if s > 0 else 'skewed_left'})"
    )
    held = run([number, word], sites, task)
    assert "the task asks for one of the words 'symmetric', 'skewed_right', 'skewed_left'" in (
        held.trajectory.steps[0].observation
    )
    assert held.status == "success" and held.answer == {"shape": "symmetric"}


def test_a_typed_answer_confirmed_with_final_answer_underscore_is_still_typed(sites):
    # replayed DABench 111: 136.13 and 61.37 typed in (the pre-fix output), held, then `final_answer(_final_answer)`
    task = "What is the mean score, rounded to two decimals?"
    typed = code("m = df.score.mean()", "final_answer(5.55)")
    confirmed = run([typed, code("final_answer(_final_answer)")], sites, task)
    assert "typed in" in confirmed.trajectory.steps[0].observation
    assert (
        confirmed.status == "failed_checks"
        and "still the one typed in before the code ran" in confirmed.trajectory.error
    )
    # typed, but the same as what the first block printed: once the output was seen, confirming it stands
    shown = code("print(round(df.score.mean(), 2))", "final_answer(5.45)")
    assert run([shown, code("final_answer(_final_answer)")], sites, task).status == "success"


def test_a_new_answer_that_warns_after_the_last_look_is_held_and_cannot_stand(sites):
    # DABench 271: held for its decimals (the review's last look), the next answer carried a NaN (a log taken twice)
    # and was `success`; a changed answer that now warns is looked at once more, and sent again it fails its checks
    task = "Mean of score and the log10 of the first score, each rounded to two decimal places."
    unrounded = "final_answer({'mean': df.score.mean(), 'log': float(np.log10(df.score.iloc[0]))})"
    nan = "final_answer({'mean': 5.45, 'log': float('nan')})"
    fixed = "final_answer({'mean': 5.45, 'log': 0.96})"
    setup = "import numpy as np"
    kept = run([code(setup, unrounded), code(nan), code(nan)], sites, task)
    assert "the task asks for 2 decimal places" in kept.trajectory.steps[0].observation
    assert "'log' is NaN" in kept.trajectory.steps[1].observation
    assert kept.status == "failed_checks" and "NaN" in kept.trajectory.error
    right = run([code(setup, unrounded), code(nan), code(fixed)], sites, task)
    assert right.status == "success" and right.answer == {"mean": 5.45, "log": 0.96}
    plain = run([code(setup, unrounded), code(fixed)], sites, task)  # no new warning: no second look
    assert plain.status == "success" and len(plain.trajectory.steps) == 2


def test_a_condition_the_task_never_states_is_held_once_then_the_answer_stands():
    # a development probe: "average age of female billionaires" filtered to one category as well (a value seen in
    # the data's profile), and the independent attempt did the same and agreed
    people = pd.DataFrame(
        {"gender": ["F", "F", "M"], "category": ["Finance", "Tech", "Tech"], "age": [50.0, 70.0, 40.0]}
    )
    task = "What's the average age of female billionaires?"
    invented = "x = df[(df['gender'] == 'F') & (df['category'] == 'Finance')]['age'].mean()\nfinal_answer(x)"
    asked = "x = df[df['gender'] == 'F']['age'].mean()\nfinal_answer(x)"
    result = run([code(invented), code(asked)], people, task)
    assert (
        "a condition the task does not state:\n- df['category'] == 'Finance'" in result.trajectory.steps[0].observation
    )
    assert result.status == "success" and result.answer == 60.0
    # sent again as it was (the task may name it in other words), it stands: the note is asked once
    result = run([code(invented), code(invented)], people, task)
    assert result.status == "success" and result.answer == 50.0
    # a condition the task states is no note
    result = run([code(asked)], people, task)
    assert len(result.trajectory.steps) == 1 and result.answer == 60.0


def test_an_answer_from_numbers_sorted_as_text_is_held_with_the_conversion():
    def songs():  # a fresh table each run: in-process code changes the given one
        return pd.DataFrame({"artist": ["a", "b", "c"], "streams": ["999,120", "1,250,000", "87,004"]})

    as_text = "final_answer(df.sort_values(by='streams', ascending=False)['artist'].head(1).tolist())"
    as_numbers = (
        "df['streams'] = pd.to_numeric(df['streams'].str.replace(',', ''))\n"
        "final_answer(df.sort_values(by='streams', ascending=False)['artist'].head(1).tolist())"
    )
    task = "Which artist has the most streamed song?"
    result = run([code(as_text), code("import pandas as pd\n" + as_numbers)], songs(), task)
    assert "ordering numbers written as text" in result.trajectory.steps[0].observation
    assert result.status == "success" and result.answer == ["b"]
    result = run([code(as_text), code(as_text)], songs(), task)  # sent again from text order: not a success
    assert result.status == "failed_checks" and result.answer == ["a"]


def test_a_series_held_for_a_misread_statistic_does_not_end_the_run_in_error():
    # the analyst rolling_peak run: `rolling_avg = ...rolling(7).max()` sent as a Series; recording the held
    # answer's verdicts called .item() on the Series and the run ended `error`
    traffic = pd.DataFrame({"visits": range(30)})
    first = "rolling_avg = df['visits'].rolling(window=7).max()\nfinal_answer(pd.Series(rolling_avg.iloc[:7]))"
    fixed = "final_answer(df['visits'].rolling(window=7).mean().max())"
    result = run(
        [code("import pandas as pd\n" + first), code(fixed)], traffic, "Highest 7-day rolling average of visits?"
    )
    assert "computes max, not mean" in result.trajectory.steps[0].observation
    assert result.status == "success" and result.answer == 26.0


def test_a_condition_the_task_states_and_no_code_applies_is_held_once_then_the_answer_stands():
    # a development probe: "unpaid fire hydrant fines" summed over every fire hydrant ticket, paid or not, and the
    # independent attempt did the same and agreed
    tickets = pd.DataFrame(
        {"violation": ["Fire Hydrant", "No Permit", "Fire Hydrant"], "paid": ["yes", "no", "no"], "fine": [1.0, 2, 4]}
    )
    task = "How much is owed in unpaid fire hydrant fines?"
    every = "final_answer(float(df[df['violation'] == 'Fire Hydrant']['fine'].sum()))"
    unpaid = "final_answer(float(df[(df['violation'] == 'Fire Hydrant') & (df['paid'] == 'no')]['fine'].sum()))"
    result = run([code(every), code(unpaid)], tickets, task)
    assert (
        "the task states a condition that no code so far applies:\n- 'unpaid': df['paid'] (yes/no) is never read"
        in (result.trajectory.steps[0].observation)
    )
    assert result.status == "success" and result.answer == 4.0
    again = run([code(every), code(every)], tickets, task)  # sent again (the task may not mean it): it stands
    assert again.status == "success" and again.answer == 5.0
    assert len(run([code(unpaid)], tickets, task).trajectory.steps) == 1  # applied: no note


def test_rows_the_task_says_are_entered_twice_are_taken_out_or_the_answer_is_held():
    # a development probe: "Some repairs were entered twice; count each once" answered with the mean over every row
    repairs = pd.DataFrame({"repair_id": [1, 2, 2, 3], "cost": [10.0, 40.0, 40.0, 10.0]})
    task = "What is the average cost of a repair? Some repairs were entered twice; count each once."
    every = "final_answer(float(df['cost'].mean()))"
    once = "final_answer(float(df.drop_duplicates()['cost'].mean()))"
    result = run([code(every), code(once)], repairs, task)
    assert "'entered twice': no code takes duplicate rows out" in result.trajectory.steps[0].observation
    assert result.status == "success" and result.answer == 20.0
    kept = run([code(every), code(every)], repairs, task, verify=None)  # sent again unchanged: it kept the problem
    assert kept.status == "failed_checks" and "does not apply 'entered twice'" in kept.trajectory.error
