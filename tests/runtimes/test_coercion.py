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
