"""errors="coerce" loses values silently; the cell's stderr says how many and which (cave.runtimes.coercion).

Run in-process and in a real kernel: the model reads the note where it reads every other warning.
"""

from __future__ import annotations

import pandas as pd
import pytest

DEATHS = pd.DataFrame(
    {"country": ["A", "B", "C", "D", "E"], "deaths": ["298[110-510]", "0", "13316[9970-16600]", None, "7"]}
)


@pytest.fixture
def rt(bare_rt):
    bare_rt.inject("df", DEATHS)
    return bare_rt


def test_a_lossy_coercion_is_reported_once_with_examples_and_the_result_is_unchanged(rt):
    ex = rt.execute(
        "import pandas as pd\n"
        "x = pd.to_numeric(df['deaths'], errors='coerce')\n"
        "for _ in range(3):\n"
        "    y = pd.to_numeric(df['deaths'], errors='coerce')\n"
        "x.max()"
    )
    assert ex.error is None and ex.result.endswith("7.0)")  # what the call returns is untouched
    assert ex.stderr.count("Note (line 2)") == 1 and ex.stderr.count("Note (line 4)") == 1  # once per site
    assert "turned 2 of 4 non-empty values of 'deaths' into NaN" in ex.stderr  # None is not counted as lost
    assert "'298[110-510]'" in ex.stderr and "str.extract" in ex.stderr
    fix = ex.stderr.split("keep the number in each: ")[1].split("; if they")[0]  # the line to run, on df['deaths']
    assert rt.execute(f"z = {fix}").ok and rt.retrieve("z").tolist()[:3] == [298.0, 0.0, 13316.0]
    assert rt.retrieve("y").isna().sum() == 3


def test_per_value_coercion_in_apply_is_one_note_and_dates_say_nat(rt):
    ex = rt.execute("import pandas as pd\nv = df['deaths'].apply(lambda s: pd.to_numeric(s, errors='coerce'))")
    assert ex.stderr.count("Note (line 2)") == 1 and "(and maybe more in a loop)" in ex.stderr
    ex = rt.execute("d = pd.to_datetime(pd.Series(['2024-01-05', 'soon', '']), errors='coerce')")
    assert "to_datetime(errors=\"coerce\") turned 1 of 2 non-empty values into NaT, e.g. 'soon'" in ex.stderr


def test_dates_written_several_ways_get_the_line_that_reads_each(rt):
    # a development run coerced 80 of 103 signup dates ('Apr 12 2025', '07 May 2025', ...) to NaT and sent the table
    rt.inject("signups", __import__("pandas").DataFrame({"day": ["2025-02-08", "Apr 12 2025", "07 May 2025", "x"]}))
    ex = rt.execute("import pandas as pd\nd = pd.to_datetime(signups['day'], errors='coerce')")
    fix = "pd.to_datetime(signups['day'], format='mixed', errors='coerce')"
    assert "turned 3 of 4 non-empty values of 'day' into NaT" in ex.stderr and fix in ex.stderr
    assert rt.execute(f"d = {fix}").ok and rt.retrieve("d").notna().sum() == 3
    ex = rt.execute("d = pd.to_datetime(pd.Series(['2024-01-05', 'soon', 'later']), errors='coerce')")
    assert "NaT" in ex.stderr and "format='mixed'" not in ex.stderr  # words that are no dates: no such line


def test_nothing_is_said_when_nothing_is_lost_or_nothing_is_coerced(rt):
    ex = rt.execute(
        "import pandas as pd\n"
        "a = pd.to_numeric(df['deaths'].str.extract(r'^(\\d+)')[0], errors='coerce')\n"
        "b = pd.to_numeric(pd.Series(['1', '2']))\n"
        "def to_numeric(x, errors=None):\n"
        "    return x\n"
        "c = to_numeric('zz', errors='coerce')"  # the user's own function of that name: called, nothing lost
    )
    assert ex.error is None and ex.stderr == "", ex.stderr
    assert rt.retrieve("c") == "zz" and rt.retrieve("a").tolist()[:3] == [298.0, 0.0, 13316.0]
    ex = rt.execute("pd.to_numeric(df, errors='coerce')")  # the call's own error, as without the audit
    assert ex.error is not None and ex.error.type == "TypeError" and "1-d array" in ex.error.message


def test_values_outside_pd_cuts_bins_are_reported(rt):
    # DABench 6: bins=[0, 12, 19, 59, inf] leave an age of 0 in no group (bins are closed on the right)
    rt.inject("people", pd.DataFrame({"age": [0.0, 5, 15, 30, 70, None], "fare": [10, 20, 30, 40, 50, 60]}))
    ex = rt.execute(
        "import pandas as pd\n"
        "people['group'] = pd.cut(people['age'], bins=[0, 12, 19, 59, float('inf')], labels=list('CTAE'))\n"
        "people.groupby('group', observed=True).fare.mean().to_dict()"
    )
    assert ex.error is None and "'C': 20.0" in ex.result  # the call's result is untouched
    assert "Note (line 2): pd.cut turned 1 of 5 non-empty values of 'age' into NaN, e.g. 0.0" in ex.stderr
    assert "include_lowest=True" in ex.stderr
    ex = rt.execute(
        "a = pd.cut(people['age'], bins=[0, 12, 19, 59, float('inf')], include_lowest=True)\n"
        "b, edges = pd.cut(people['age'], 3, retbins=True)"
    )
    assert ex.error is None and ex.stderr == "", ex.stderr


def test_unix_times_read_as_nanoseconds_are_reported_with_the_unit_and_real_dates_are_not(rt):
    # DABench 688: pd.to_datetime(df['dt']) on Unix seconds: every reading at 1970-01-01 00:00:01, all "night"
    rt.inject("weather", pd.DataFrame({"dt": [1437730851, 1437734494, 1437738046]}))
    ex = rt.execute(
        "import pandas as pd\nweather['t'] = pd.to_datetime(weather['dt'])\nh = weather['t'].dt.hour.tolist()"
    )
    assert ex.error is None and rt.retrieve("h") == [0, 0, 0]  # the call's own result, unchanged
    assert "read the integers of 'dt' as nanoseconds since 1970" in ex.stderr
    fix = "pd.to_datetime(weather['dt'], unit='s')"
    assert fix in ex.stderr and rt.execute(f"h = {fix}.dt.hour.tolist()").ok and rt.retrieve("h") == [9, 10, 11]
    quiet = rt.execute(
        "a = pd.to_datetime(weather['dt'], unit='s')\nb = pd.to_datetime(pd.Series(['2015-07-24']))\n"
        "c = pd.to_datetime(pd.Series([20150724, 20150725]).astype(str), format='%Y%m%d')"
    )
    assert quiet.error is None and quiet.stderr == "", quiet.stderr


def test_an_answer_from_unix_times_read_as_nanoseconds_is_held_and_the_given_table_put_back():
    from cave.agent import Agent
    from cave.llm.base import Scripted

    weather = pd.DataFrame({"dt": [1437730851 + 3600 * h for h in range(24)]})
    misread = "weather['dt'] = pd.to_datetime(weather['dt'])\nfinal_answer(int((weather['dt'].dt.hour < 6).sum()))"
    fixed = (
        "weather['dt'] = pd.to_datetime(weather['dt'], unit='s')\nfinal_answer(int((weather['dt'].dt.hour < 6).sum()))"
    )
    agent = Agent(
        # the third reply is the independent attempt (verify: 1), in a fresh kernel holding the readings as given
        model=Scripted([f"```python\nimport pandas as pd\n{c}\n```" for c in (misread, fixed, fixed)]),
        runtime="kernel",
    )
    agent.runtime.inject("weather", weather)
    try:
        result = agent.run("How many readings are at night (0:00 to 5:59)?")
    finally:
        agent.runtime.close()
    held = result.trajectory.steps[0].observation
    assert "Unix times that pd.to_datetime read as nanoseconds" in held and "it is back as it was given" in held
    assert result.status == "success" and result.answer == 6
