"""A missing column's error names the closest real ones, where the cell ran (in this process and in a kernel)."""

from __future__ import annotations

import pandas as pd
import pytest


@pytest.fixture
def rt(bare_rt):
    bare_rt.inject("calls", pd.DataFrame({"timestamp": ["a"], "avg. wait time": ["00:01:00"], "Fare": [7.25]}))
    return bare_rt


def test_a_misspelt_column_is_answered_with_did_you_mean(rt):
    ex = rt.execute("calls['avg.wait time'].mean()")
    assert ex.error.type == "KeyError"
    assert "Did you mean 'avg. wait time' (a column of calls)?" in ex.error.message
    alias = "calls['avg.wait time'] = calls['avg. wait time']"
    assert ex.error.traceback.rstrip().endswith(f"To keep the name your code uses: {alias}")
    assert rt.execute(f"{alias}\nassert calls['avg.wait time'].iloc[0] == '00:01:00'").ok  # the line it offers works
    attr = rt.execute("calls.fare.sum()")
    assert attr.error.type == "AttributeError" and "Did you mean 'Fare' (a column of calls)?" in attr.error.message


def test_no_guess_without_a_close_column_or_for_other_keys(rt):
    assert "Did you mean" not in rt.execute("calls['revenue']").error.message
    assert "Did you mean" not in rt.execute("{'a': 1}['b']").error.message
    assert "Did you mean" not in rt.execute("{'timestamps': 1}['timestamp']").error.message  # the frame has it


def test_any_objects_missing_attribute_names_the_close_ones_or_what_it_has(rt):
    # scipy-style result objects: a 1.5B asked a ShapiroResult for .kurtosis, .skewness, .kstatistic in turn
    setup = "from collections import namedtuple\nr = namedtuple('ShapiroResult', 'statistic pvalue')(0.95, 0.003)"
    assert rt.execute(setup).ok
    assert "Did you mean 'pvalue'?" in rt.execute("r.p_value").error.message
    assert "A ShapiroResult has: count, index, pvalue, statistic." in rt.execute("r.effect").error.message
    assert "the skewness is its own function of the values" in rt.execute("r.skewness").error.message


def test_a_p_value_asked_of_a_correlation_number_names_pearsonr(rt):
    # DABench 140, 269: df.a.corr(df.b).pvalue, then a p-value made up as 2 * (1 - abs(r))
    ex = rt.execute("import numpy as np\np = np.float64(0.99).pvalue")
    assert ex.error.type == "AttributeError"
    assert "pandas' .corr() gives only the coefficient" in ex.error.message
    assert "r, p = pearsonr(df['a'], df['b'])" in ex.error.message


def test_a_column_of_another_frame_and_names_with_spaces_at_their_ends(rt):
    # by_hour made from calls, then asked for calls' column; 'avg. wait time ' the model cannot type
    assert rt.execute("by_hour = calls.groupby('timestamp').Fare.sum().reset_index()").ok
    assert "'avg. wait time' is a column of calls." in rt.execute("by_hour['avg. wait time']").error.message
    assert rt.execute("calls['wait '] = calls['avg. wait time']").ok
    message = rt.execute("calls['wait'].iloc[0]").error.message
    assert "Did you mean 'wait ' (a column of calls)?" in message
    assert "calls.columns = calls.columns.str.strip()" in message
    assert rt.execute("calls.columns = calls.columns.str.strip()\nassert calls['wait'].iloc[0] == '00:01:00'").ok


def test_text_fed_to_a_model_names_the_frames_text_columns(rt):
    # DABench 7: model.fit(whole frame) failed on 'Ball, Mrs. (Ada E Hall)', then on 'S.O.C. 14879', one per step
    people = pd.DataFrame({"Name": ["Ball, Mrs.", "Bo"], "Age": [30.0, 4.0], "Ticket": ["S.O.C. 14879", "A/5"]})
    rt.inject("people", people)
    ex = rt.execute(
        "from sklearn.linear_model import LinearRegression\nLinearRegression().fit(people.drop(columns='Name'), [0, 1])"
    )
    assert ex.error.type == "ValueError"
    assert "'S.O.C. 14879' is in people['Ticket'], a text column. people's text columns are 'Name', 'Ticket'" in (
        ex.error.message
    )
    assert "pd.get_dummies" in ex.error.traceback
    assert "text column" not in rt.execute("float('abc')").error.message  # in no frame: the error as it was


def test_a_column_of_another_frame_comes_with_the_merge_that_brings_it(rt):
    # analyst city_revenue: groupby('city') on orders (city is a customers column); the 1.5B looped for 7 steps
    rt.inject("orders", pd.DataFrame({"order_id": [1, 2, 3], "customer_id": [10, 11, 99], "amount": [5.0, 7.0, 1.0]}))
    rt.inject("customers", pd.DataFrame({"customer_id": [10, 11], "city": ["Oslo", "Rome"]}))
    assert rt.execute("kept = orders[orders.customer_id.isin(customers.customer_id)]").ok
    ex = rt.execute("kept.groupby('city')['amount'].sum()")
    assert "'city' is a column of customers." in ex.error.message
    line = "kept = kept.merge(customers[['customer_id', 'city']], on='customer_id', how='left')"
    assert line in ex.error.message
    assert rt.execute(f"{line}\nby_city = kept.groupby('city')['amount'].sum().to_dict()").ok  # the line works
    assert rt.retrieve("by_city") == {"Oslo": 5.0, "Rome": 7.0}


def test_a_key_the_select_left_out_is_named_with_the_select_that_reads_it(bare_rt, tmp_path):
    # analyst sql_city_spend: SELECT city FROM customers, SELECT amount FROM orders, then a merge on customer_id;
    # told only "'customer_id' is a column of orders", the 1.5B changed the orders SELECT for 7 steps
    import sqlalchemy

    path = tmp_path / "shop.db"
    engine = sqlalchemy.create_engine(f"sqlite:///{path}")
    pd.DataFrame({"customer_id": [1, 2], "city": ["Oslo", "Rome"]}).to_sql("customers", engine, index=False)
    pd.DataFrame({"customer_id": [1, 1, 2], "amount": [5.0, 7.0, 1.0]}).to_sql("orders", engine, index=False)
    bare_rt.inject("db", engine)
    ex = bare_rt.execute(
        "import pandas as pd\n"
        "customers = pd.read_sql('SELECT city FROM customers', db)\n"
        "orders = pd.read_sql('SELECT amount, customer_id FROM orders', db)\n"
        "merged = pd.merge(customers, orders, on='customer_id')"
    )
    assert ex.error is not None and "'customer_id' is a column of orders." in ex.error.message
    assert (
        "customers has no 'customer_id' column, but the database table customers has: select it too "
        "(SELECT customer_id, city FROM customers)." in ex.error.message
    )


def test_a_groupby_column_the_select_left_out(bare_rt, tmp_path):
    # analyst sql_orders_per_month_2025: SELECT date FROM orders, then groupby('month')['order_id'] ("Column not
    # found: order_id", a KeyError worded its own way)
    import sqlalchemy

    engine = sqlalchemy.create_engine(f"sqlite:///{tmp_path / 'shop.db'}")
    pd.DataFrame({"order_id": [1, 2], "date": ["2025-01-02", "2025-02-03"]}).to_sql("orders", engine, index=False)
    bare_rt.inject("db", engine)
    ex = bare_rt.execute(
        "import pandas as pd\norders_df = pd.read_sql('SELECT date FROM orders', db)\n"
        "n = orders_df.groupby('date')['order_id'].count()"
    )
    assert "orders_df has no 'order_id' column, but the database table orders has: select it too " in ex.error.message
    assert "(SELECT order_id, date FROM orders)" in ex.error.message


def test_numbers_written_with_separators_get_the_line_that_converts_them(bare_rt):
    # DABench 423: Volatility.corr(Volume) where Volume held '5,350,380'; told to use get_dummies on text features,
    # the model dropped Volume and correlated with Close instead
    bare_rt.inject("df", pd.DataFrame({"Open": [1.0, 2.0, 3.0], "Volume": ["5,350,380", "1,200", "2,000,000"]}))
    ex = bare_rt.execute("r = df['Open'].corr(df['Volume'])")
    assert ex.error is not None and "numbers written as text" in ex.error.message
    line = ex.error.message.split("Convert the column first: ", 1)[1].strip()
    assert bare_rt.execute(f"import pandas as pd\n{line}\nv = df['Volume'].tolist()").ok
    assert bare_rt.retrieve("v") == [5350380.0, 1200.0, 2000000.0]


def test_a_value_column_asked_of_a_wide_table_says_how_to_read_it(bare_rt):
    # DABench 492: one column per field of study; the model asked df_2010['Percent'] for seven steps
    fields = ["Agriculture", "Architecture", "Biology", "Business", "Education", "Engineering", "Health", "Math"]
    df = pd.DataFrame(
        {"Year": [2009, 2010], **{f: [float(i), float(i) + (f == "Health") * 50] for i, f in enumerate(fields)}}
    )
    bare_rt.inject("df", df)
    ex = bare_rt.execute("df_2010 = df[df['Year'] == 2010]\nrates = df_2010['Percent']")
    assert "df_2010 is wide: its 8 number columns ('Agriculture', 'Architecture', 'Biology', ...)" in ex.error.message
    assert "df_2010.set_index('Year').loc[2010].idxmax()" in ex.error.message  # a real key: a placeholder was copied
    assert bare_rt.execute("top = df_2010.set_index('Year').loc[2010].idxmax()").ok
    assert bare_rt.retrieve("top") == "Health"


def test_a_key_asked_of_a_wide_table_whose_column_names_hold_it_gives_the_column(bare_rt):
    # DABench 252: gdpPercap_1952 ... gdpPercap_2007 by country; df['year'] == 1992 five times, then the hint's
    # melt (which named the values 'year') was not tried, and its .loc[<country>] placeholder was copied as code
    gdp = pd.DataFrame({"country": ["Nepal", "Oman"], **{f"gdpPercap_{y}": [1.0, 2.0] for y in range(1952, 2008, 5)}})
    bare_rt.inject("df", gdp)
    ex = bare_rt.execute("d = df[df['year'] == 1992]")
    assert "one year's values are one column, e.g. df['gdpPercap_1952']" in ex.error.message
    line = ex.error.message.split("a long table with a 'year' column: ", 1)[1].rstrip(".")
    assert bare_rt.execute(line.replace(", then ", "\n")).ok
    assert sorted(set(bare_rt.retrieve("t")["year"])) == [str(y) for y in range(1952, 2008, 5)]


@pytest.mark.parametrize(
    ("code", "said"),
    [
        ("x = df[['wind_speed']]", "Did you mean 'wind speed' (a column of df)?"),  # DABench 363: no hint before
        ("x = df.drop(columns=['wnd speed'])", "Did you mean 'wind speed' (a column of df)?"),
        ("x = df[['Fare', 'min', 'max', 'mean']]", "'min', 'max', 'mean' are statistics, not columns"),  # 178
    ],
)
def test_each_name_of_a_list_that_pandas_says_is_missing_gets_its_hint(bare_rt, code, said):
    bare_rt.inject("df", pd.DataFrame({"wind speed": [1.0, 2.0], "Fare": [3.0, 4.0]}))
    ex = bare_rt.execute(code)
    assert ex.error is not None and said in ex.error.message


def test_an_undefined_name_written_like_a_variable_of_an_earlier_cell_names_it(rt):
    # DABench 297: `pvalue` three times where the earlier cell made `p_value`
    assert rt.execute("p_value = 0.03").ok
    ex = rt.execute("final = pvalue * 2")
    assert (
        ex.error.type == "NameError" and "Did you mean 'p_value' (a variable of an earlier cell)?" in ex.error.message
    )
    assert "Did you mean" not in rt.execute("x = nothing_like_it").error.message


def test_a_moment_asked_of_a_test_result_names_its_own_function(bare_rt):
    # DABench 375: shapiro(x).kstatistic, .kurtosis, .skew in turn, to max_steps
    bare_rt.inject("df", pd.DataFrame({"trips": [1.0, 2.0, 2.5, 4.0, 7.0, 3.0, 2.0, 5.0]}))
    for attribute, line in (("kurtosis", "from scipy.stats import kurtosis; kurtosis(x)"), ("kstatistic", "skew(x)")):
        ex = bare_rt.execute(f"from scipy.stats import shapiro\nr = shapiro(df['trips'])\nk = r.{attribute}")
        assert ex.error is not None and "holds the test's own numbers" in ex.error.message and line in ex.error.message
