"""A selection that matched nothing says so on the cell's stderr (cave.runtimes.matches), where the cell ran."""

from __future__ import annotations

import doctest

import pandas as pd
import pytest
from cave.runtimes import matches, selection_fixes, sought, value_notes

SIGNUPS = pd.DataFrame(
    {
        "signup_date": ["2025-03-04", "03/15/2025", "March 3, 2025", None],
        "region": ["North", "South", "north", "East"],
        "year": [2024, 2025, 2024, 2023],
        "year_text": ["2024", "2025", "2024", "2023"],
    }
)


@pytest.fixture
def rt(bare_rt):
    bare_rt.inject("signups", SIGNUPS)
    return bare_rt


def test_doctests():
    assert doctest.testmod(matches).failed == 0
    assert doctest.testmod(selection_fixes).attempted > 0 and doctest.testmod(selection_fixes).failed == 0
    assert doctest.testmod(sought).attempted > 0 and doctest.testmod(sought).failed == 0
    assert doctest.testmod(value_notes).attempted > 0 and doctest.testmod(value_notes).failed == 0


@pytest.mark.parametrize(
    ("code", "said"),
    [
        ("n = len(signups[signups['signup_date'].str.contains('Mar 2025')])", ".str.contains('Mar 2025') matched none"),
        ("n = int((signups['region'] == 'West').sum())", "== 'West' matched none of the 4 values of 'region'"),
        ("n = int(('West' == signups.region).sum())", "== 'West' matched none"),
        ("n = len(signups[signups.region.isin(['west', 'WEST'])])", ".isin(['west', 'WEST']) matched none"),
        ("n = int((signups.year == '2024').sum())", "They are numbers: compare with 2024 (no quotes)"),
        ("n = int((signups.year_text == 2024).sum())", "They are text: compare with '2024'"),
    ],
)
def test_a_selection_that_matched_nothing_is_reported_and_the_result_is_unchanged(rt, code, said):
    ex = rt.execute(code)
    assert ex.error is None and rt.retrieve("n") == 0
    assert said in ex.stderr and ex.stderr.count("Note (line 1)") == 1
    assert "they look like" in ex.stderr or "they are only" in ex.stderr


def test_a_column_compared_with_a_loops_value_that_matches_nothing_names_every_value_of_a_category(rt):
    # DABench 734 on main: continents typed from memory ('north_america') in a loop; pearsonr failed on the
    # empty rows four times and the run reached max_steps
    rt.inject("gm", pd.DataFrame({"continent": ["asia", "europe", "americas"] * 4, "x": range(12)}))
    code = "out = {}\nfor c in ['asia', 'north_america']:\n    out[c] = len(gm[gm['continent'] == c])"
    ex = rt.execute(code)
    assert ex.error is None and rt.retrieve("out") == {"asia": 4, "north_america": 0}
    assert "== 'north_america' matched none of the 12 values of 'continent'" in ex.stderr
    assert "they are only 'asia', 'europe', 'americas'" in ex.stderr
    # a column compared with a Series held by a name is elementwise: nothing sought, no note
    ex = rt.execute(
        "other = gm['continent'].iloc[::-1].reset_index(drop=True)\nsame = (gm['continent'] == other).sum()"
    )
    assert ex.error is None and "matched none" not in ex.stderr


def test_a_moment_written_another_way_than_the_columns_dates_gets_the_date_comparison(rt):
    # DABench 589: df['timestamp'] == '20170413_080000' over 'Apr 13  2017 08:00:00 AM': nan rate, then 0.0 typed
    rt.inject(
        "calls", pd.DataFrame({"timestamp": ["Apr 13  2017 07:45:00 AM", "Apr 13  2017 08:00:00 AM"], "n": [1, 2]})
    )
    ex = rt.execute("t = '20170413_080000'\nrows = calls[calls['timestamp'] == t]")
    assert ex.error is None and "'20170413_080000' reads as 2017-04-13 08:00:00" in ex.stderr
    fix = "pd.to_datetime(df['timestamp'], format='mixed') == pd.Timestamp('2017-04-13 08:00:00')"
    assert fix in ex.stderr
    ex = rt.execute("import pandas as pd\nn = int(calls[" + fix.replace("df[", "calls[") + "]['n'].sum())")
    assert ex.error is None and rt.retrieve("n") == 2  # the comparison it offers selects the row


def test_a_month_sought_in_dates_gets_no_one_moment_to_equal(rt):
    # analyst march_signups at c38d7e5: 'Mar 2025' was offered as == Timestamp('2025-03-01'), one day for a month
    rt.inject("su", pd.DataFrame({"d": ["2025/02/08", "Mar 31 2025", "Apr 12 2025", "07 May 2025"]}))
    ex = rt.execute("n = len(su[su['d'].str.contains('Mar 2025')])")
    assert "matched none" in ex.stderr and "pd.Timestamp" not in ex.stderr
    ex = rt.execute("n = len(su[su['d'] == '2025-03-31'])")  # a day: every time of that day
    assert "pd.to_datetime(df['d'], format='mixed').dt.normalize() == pd.Timestamp('2025-03-31')" in ex.stderr


def test_a_pattern_that_extracts_from_no_value_is_reported_and_one_that_fits_is_not(rt):
    # DABench 450: str.extract(r'(\d{4}-\d{2})') over '01/01/2015 00:00' made every month NaN, and the empty
    # per-month means were confirmed as the answer
    ex = rt.execute(
        "m = signups['signup_date'].str.extract(r'(\\d{2}:\\d{2})')\n"
        "y = signups['signup_date'].str.extract(r'(\\d{4})', expand=False)"
    )
    assert ex.error is None and rt.retrieve("m")[0].isna().all() and rt.retrieve("y").notna().sum() == 3
    assert "Note (line 1): .str.extract(" in ex.stderr and "matched none of the 3 values of 'signup_date'" in ex.stderr
    assert "line 2" not in ex.stderr


def test_texts_the_column_holds_written_another_way_get_the_line_to_write(bare_rt):
    # DABench 308: the titles were extracted without their dot, and the model kept asking for 'Mr.' (seven times)
    bare_rt.inject("df", pd.DataFrame({"Title": ["Mr", "Mrs", "Miss", "Master", "Don", "Mr"], "Fare": range(6)}))
    ex = bare_rt.execute(
        "sel = df[df['Title'].isin(['Mr.', 'Mrs.', 'Miss.', 'Master.'])]\nn = int((df.Title == 'MISS').sum())"
    )
    assert ex.error is None and len(bare_rt.retrieve("sel")) == 0 and bare_rt.retrieve("n") == 0
    assert "'Mr.' is written 'Mr'" in ex.stderr
    assert "use .isin(['Mr', 'Mrs', 'Miss', 'Master'])" in ex.stderr
    assert "Note (line 2): == 'MISS' matched none" in ex.stderr and "compare with == 'Miss'" in ex.stderr


def test_a_value_that_matched_some_rows_but_not_its_other_spellings_is_reported(rt):
    # the count stays what the code asked for; the note says what it left out and the line that counts them all
    ex = rt.execute("a = int((signups['region'] == 'North').sum())")
    assert ex.error is None and rt.retrieve("a") == 1
    assert "== 'North' left out 1 rows of 'region' that hold it spelled another way ('north')" in ex.stderr
    assert "df['region'].str.strip().str.lower() == 'north'" in ex.stderr
    ex = rt.execute("b = len(signups[signups.region.str.contains('North')])")
    assert rt.retrieve("b") == 1 and "str.contains('North', case=False)" in ex.stderr


def test_nothing_is_said_when_something_matched_or_nothing_was_a_series(rt):
    ex = rt.execute(
        "a = int((signups['region'] == 'South').sum())\n"
        "b = int(signups.region.str.lower().eq('north').sum())\n"
        "c = 0\n"
        "for i in range(5):\n"
        "    if i == 3:\n"
        "        c += 1\n"
        "d = 'x' == 'y'\n"
        "e = signups.region.str.contains('orth').sum()"
    )
    assert ex.error is None and ex.stderr == "", ex.stderr
    assert [rt.retrieve(k) for k in "abcd"] == [1, 2, 1, False] and rt.retrieve("e") == 2
    ex = rt.execute("signups.nope.str.contains('x')")  # the comparison's own error, as without the audit
    assert ex.error.type == "AttributeError" and "nope" in ex.error.message


def test_an_idxmax_over_a_wide_tie_is_reported(rt):
    ex = rt.execute("top = signups.groupby('signup_date').size().idxmax()\nbest = signups.year.idxmax()")
    assert ex.error is None and rt.retrieve("top") == "03/15/2025" and rt.retrieve("best") == 1
    assert "Note (line 1): idxmax() picked the first of 3 entries tied at 1 (of 3)" in ex.stderr
    assert "line 2" not in ex.stderr  # one maximum: nothing to say


def test_a_function_carried_out_of_the_runtime_still_runs_in_the_host(rt, capfd):
    # the audits rewrite the cell's code: the function keeps calling their helpers wherever it is called
    assert rt.execute(
        "import pandas as pd\n"
        "def is_a(x):\n"
        "    return x == 'a'\n"
        "def numbers(s):\n"
        "    return pd.to_numeric(s, errors='coerce')"
    ).ok
    assert rt.retrieve("is_a")("a") is True
    assert rt.retrieve("numbers")(pd.Series(["1", "x"])).tolist()[0] == 1.0
    assert "Note" not in capfd.readouterr().err  # notes are for the model, in a cell; not the host's stderr


def test_a_group_picked_by_position_names_the_label_it_picked(rt):
    # DABench 247: .mean().iloc[0] sent as the eligible players' mean; the first group is eligible = 0
    ex = rt.execute(
        "g = signups.groupby('year')['year_text'].count()\n"
        "first = int(g.iloc[0])\n"
        "last = int(g.iloc[-1])\n"
        "row = signups.iloc[0]\n"  # row numbers: nothing to say
        "top = signups.sort_values('year').reset_index(drop=True).iloc[0]"
    )
    assert ex.error is None and (rt.retrieve("first"), rt.retrieve("last")) == (1, 1)
    assert (
        "Note (line 2): .iloc[0] is the entry labelled 2023 of 'year' (labels in order: 2023, 2024, 2025)" in ex.stderr
    )
    assert "Note (line 3): .iloc[-1] is the entry labelled 2025 of 'year'" in ex.stderr
    assert "line 4" not in ex.stderr and "line 5" not in ex.stderr


def test_the_largest_of_a_text_column_is_said_to_be_alphabetical(rt):
    # DABench 217: df['site'].max() sent as the site with the largest positive_diffsel, `success`
    ex = rt.execute("last = signups['region'].max()\nfirst = signups.region.min()\ntop = signups.year.max()")
    assert ex.error is None and (rt.retrieve("last"), rt.retrieve("first"), rt.retrieve("top")) == (
        "north",
        "East",
        2025,
    )
    assert "Note (line 1): .max() of the text column 'region' is 'north', the alphabetically last" in ex.stderr
    assert "Note (line 2): .min() of the text column 'region' is 'East', the alphabetically first" in ex.stderr
    assert "line 3" not in ex.stderr  # numbers: nothing to say


def test_a_diff_over_rows_of_several_things_in_turn_says_so(bare_rt):
    # analyst product_rise: units.diff() over the rows of every product, then the largest, answered for "rose most"
    sales = pd.DataFrame(
        {
            "product": ["phone", "tablet", "monitor"] * 2,
            "quarter": ["Q1"] * 3 + ["Q2"] * 3,
            "units": [5, 3, 4, 7, 2, 9],
        }
    )
    bare_rt.inject("sales", sales)
    ex = bare_rt.execute(
        "sales['d'] = sales['units'].diff()\n"
        "p = sales.units.pct_change(periods=1)\n"
        "g = sales.groupby('product')['units'].diff()\n"
        "s = sales.sort_values('product')\n"
        "w = s['units'].diff()"
    )
    assert ex.error is None and bare_rt.retrieve("sales")["d"].tolist()[1:] == [-2.0, 1.0, 3.0, -5.0, 7.0]
    assert "Note (line 1): .diff() compares each row with the row above it, and the rows of sales take the products" in ex.stderr  # fmt: skip
    assert "t = sales.pivot_table(index='product', columns='quarter', values='units', aggfunc='sum'), then t['Q2'] - t['Q1']" in ex.stderr  # fmt: skip
    assert "Note (line 2): .pct_change() compares" in ex.stderr
    assert "line 3" not in ex.stderr and "line 5" not in ex.stderr  # per product; rows grouped by product
    assert abs(bare_rt.retrieve("p").iloc[1] - (3 / 5 - 1)) < 1e-12


def test_a_test_over_missing_values_says_why_it_returned_nan(bare_rt):
    # DABench 298: shapiro over a column with NaN gave p = nan, and `"yes" if p > 0.05 else "no"` said "no"
    bare_rt.inject("df", pd.DataFrame({"cov": [1.0, 2.5, None, 4.0, 3.5, 2.0, 3.0], "b": [1, 2, 3, 4, 5, 6, 8]}))
    ex = bare_rt.execute(
        "from scipy import stats\n"
        "from scipy.stats import shapiro\n"
        "p = shapiro(df['cov']).pvalue\n"
        "r = stats.pearsonr(df['cov'], df['b'])[0]\n"
        "ok = shapiro(df['cov'].dropna()).pvalue\n"
        "z = stats.zscore(df['cov'], nan_policy='omit')\n"
        "s = df['cov'].skew()\n"  # pandas skips NaN: not a scipy test, nothing to say
        "k = stats.kurtosis(df['cov'])\n"
        "k2 = stats.kurtosis(df['cov'], nan_policy='omit')"
    )
    assert ex.error is None
    assert "Note (line 3): shapiro() returned nan because 1 of the 7 values of 'cov' are missing" in ex.stderr
    assert "Note (line 4): pearsonr() returned nan because" in ex.stderr
    assert "line 5" not in ex.stderr and "line 6" not in ex.stderr and "line 7" not in ex.stderr
    assert "Note (line 8): kurtosis() returned nan because" in ex.stderr and "a statistic over a nan" in ex.stderr
    assert "line 9" not in ex.stderr
    assert rt_nan(bare_rt.retrieve("p")) and not rt_nan(bare_rt.retrieve("ok"))


def rt_nan(x) -> bool:
    return x != x


def test_a_variable_picked_as_its_own_strongest_correlate_is_said_so(bare_rt):
    # DABench 117: corr['Happiness Score'].abs().idxmax() is 'Happiness Score' itself, sent as the answer
    bare_rt.inject("df", pd.DataFrame({"score": [1, 2, 3, 4, 6], "gdp": [2, 4, 5, 9, 9], "rank": [5, 4, 3, 2, 1]}))
    ex = bare_rt.execute(
        "c = df.corr()\nbest = c['score'].abs().idxmax()\nother = c['score'].drop('score').abs().idxmax()"
    )
    assert ex.error is None and bare_rt.retrieve("best") == "score" and bare_rt.retrieve("other") == "rank"
    assert "Note (line 2): idxmax() picked 'score' itself: its correlation with itself is 1" in ex.stderr
    assert "line 3" not in ex.stderr


def test_weekday_names_sought_in_a_date_column_get_the_day_name_line(bare_rt):
    # DABench 419: weekdays = ['Monday', ...]; df[df['Date'].isin(weekdays)] over 'Sep 17, 2017': every mean nan
    bare_rt.inject("df", pd.DataFrame({"Date": ["Sep 17, 2017", "Sep 18, 2017", "Sep 23, 2017"], "Open": [1.0, 2, 3]}))
    ex = bare_rt.execute(
        "weekdays = ['Monday', 'Tuesday', 'Wednesday', 'Thursday', 'Friday']\n"
        "m = df[df['Date'].isin(weekdays)]['Open'].mean()"
    )
    assert ex.error is None and "matched none of the 3 values of 'Date'" in ex.stderr
    line = "pd.to_datetime(df['Date'], format='mixed').dt.day_name().isin(['Monday', 'Tuesday', 'Wednesday', 'Thursday', 'Friday'])"
    assert line in ex.stderr
    assert bare_rt.execute(f"import pandas as pd\nm = df[{line}]['Open'].mean()").ok
    assert bare_rt.retrieve("m") == 2.0  # Monday, Sep 18


def test_a_number_bound_no_value_passes_names_the_columns_range(bare_rt):
    # a development probe: "any billionaires under 30?" filtered finalWorth > 1e9 over worths in millions, sent "none"
    bare_rt.inject("df", pd.DataFrame({"age": [25.0, 40.0, 71.0], "finalWorth": [1200.0, 2500.0, 31000.0]}))
    ex = bare_rt.execute(
        "young = df[(df['age'] < 30) & (df['finalWorth'] > 1000000000)]\n"
        "old = df[df.age > 60]\n"  # rows pass: nothing to say
        "n = sum(1 for a in [1, 2] if a > 1)"  # plain numbers: no audit
    )
    assert ex.error is None and len(bare_rt.retrieve("young")) == 0 and len(bare_rt.retrieve("old")) == 1
    assert "Note (line 1): finalWorth > 1000000000 selects no row: its 3 values run from 1200 to 31000." in ex.stderr
    assert "line 2" not in ex.stderr and "line 3" not in ex.stderr
    assert matches.MARK not in ex.stderr  # a note, not an empty selection to hold: none may be the answer


def test_ordering_numbers_written_as_text_is_said_to_be_text_order(bare_rt):
    # a development probe: the 3 most streamed songs taken from streams written '1,234,567', sorted as text
    bare_rt.inject("songs", pd.DataFrame({"artist": ["a", "b", "c"], "streams": ["999,120", "1,250,000", "87,004"]}))
    ex = bare_rt.execute(
        "top = songs.sort_values(by='streams', ascending=False).head(1)\n"
        "most = songs['streams'].max()\n"
        "names = songs.sort_values('artist')"  # text that is text: nothing to say
    )
    assert ex.error is None and bare_rt.retrieve("top")["artist"].tolist() == ["a"]  # the code's own result
    assert "Note (line 1): 'streams' holds numbers written as text ('999,120', '1,250,000', ...)" in ex.stderr
    assert "Note (line 2): 'streams' holds numbers written as text" in ex.stderr and "line 3" not in ex.stderr
    assert value_notes.TEXT_MARK not in ex.stderr  # not the alphabetically-last note: these are numbers


def test_a_month_and_year_sought_in_dates_written_otherwise_gets_the_month_comparison(bare_rt):
    # the analyst march_signups runs: .str.contains('Mar 2025') over 'Mar 31 2025', '2025/03/08', ... matched none
    bare_rt.inject("signups", pd.DataFrame({"signup_date": ["Mar 31 2025", "2025/03/08", "07 May 2025"]}))
    ex = bare_rt.execute("n = signups[signups['signup_date'].str.contains('Mar 2025')].shape[0]")
    assert "names the month 2025-03" in ex.stderr
    assert "pd.to_datetime(df['signup_date'], format='mixed').dt.to_period('M') == '2025-03'" in ex.stderr
    fixed = "import pandas as pd\nn = (pd.to_datetime(signups['signup_date'], format='mixed').dt.to_period('M') == '2025-03').sum()"
    assert bare_rt.execute(fixed).ok and bare_rt.retrieve("n") == 2
