"""Results misread by their code (a hypothesis test read backwards, an MSE named RMSE) are held once and cannot stand
as a success."""

from __future__ import annotations

import doctest
import functools

import numpy as np
import pandas as pd
import pytest
from cave.runtimes.inprocess import InProcessRuntime

import cave.review.bounds
import cave.review.estimators
import cave.review.misreadings
from cave.agent import Agent as _Agent
from cave.llm.base import Scripted
from cave.review.misreadings import backwards, unrooted

# These tests are about the holds an answer goes through; verification by agreement is tested in
# test_verify.py. Here the caller verifies (verify=None), so an accepted answer ends `success` as a role's turn does.
Agent = functools.partial(_Agent, verify=None)


def test_doctests():
    import cave.review.estimators

    for module in (cave.review.misreadings, cave.review.estimators):
        result = doctest.testmod(module)
        assert result.attempted > 0 and result.failed == 0, module.__name__


@pytest.mark.parametrize(
    "code",
    [
        "is_normal = shapiro(df.x).pvalue < 0.05",
        "stat, p = shapiro(df.x)\nfinal_answer({'is_normal': 'yes' if p < 0.05 else 'no'})",
        "alpha = 0.05\nif p_value < alpha:\n    normality = 'yes'\nelse:\n    normality = 'no'",
        "if p > 0.05:\n    is_normal = False",
        "is_normal = not (p_value >= 0.05)",
        "is_normal = shapiro(df.x)[1] <= 0.05",
        "is_normal = 0.05 > p",
        "chi2, p, dof, expected = chi2_contingency(table)\nindependent = p < 0.05",
        "final_answer({'same_distribution': bool(p_val < 0.01)})",
        "isNormal = pValue < 0.05",
    ],
)
def test_readings_that_say_the_null_holds_when_p_is_below_alpha_are_found(code):
    assert backwards(code)


@pytest.mark.parametrize(
    "code",
    [
        "is_normal = p >= 0.05",
        "final_answer({'is_normal': 'no' if p < 0.05 else 'yes'})",
        "if p_value < alpha:\n    normality = 'no'\nelse:\n    normality = 'yes'",
        "significant = p < 0.05",  # the alternative, not the null
        "not_normal = p < 0.05",
        "is_stationary = adfuller(s)[1] < 0.05",  # ADF's null is a unit root: p < alpha means stationary
        "strong = r > 0.5",
        "is_normal = skew < 0.5",  # not a p-value
        "if p < 0.05:\n    print('not normal')",
        "is_normal = p <",  # does not parse
    ],
)
def test_right_readings_and_other_comparisons_are_left_alone(code):
    assert backwards(code) == []


def _run(replies: list[str]) -> object:
    rng = np.random.default_rng(0)
    agent = Agent(
        model=Scripted([f"```python\n{r}\n```" for r in replies], repeat_last=True), runtime=InProcessRuntime()
    )
    agent.runtime.inject("df", pd.DataFrame({"qty": rng.exponential(5.0, 300)}))
    return agent.run("Does qty follow a normal distribution? Use Shapiro-Wilk at alpha 0.05. Answer yes or no.")


def _run_on(table: pd.DataFrame, codes: list[str], task: str, name: str = "df") -> object:
    """The agent on ``task`` with ``table`` given as ``name``, replying each of ``codes`` as a python block."""
    agent = Agent(model=Scripted([f"```python\n{c}\n```" for c in codes], repeat_last=True), runtime="inprocess")
    agent.runtime.inject(name, table)
    return agent.run(task)


TEST = "from scipy.stats import shapiro\np = shapiro(df['qty']).pvalue\n"


def test_an_answer_from_a_backwards_reading_is_held_once_and_the_fix_succeeds():
    # DABench 10: `is_normal = shapiro_result.pvalue < 0.05`, then "yes" for skewed data, and `success`
    result = _run([TEST + "final_answer({'is_normal': 'yes' if p < 0.05 else 'no'})",
                   TEST + "final_answer({'is_normal': 'yes' if p >= 0.05 else 'no'})"])  # fmt: skip
    first = result.trajectory.steps[0].observation
    assert "reads the hypothesis test backwards" in first and "line 3: `'yes' if p < 0.05 else 'no'`" in first
    assert (
        "right way round (run it):\n```python\n" + TEST + "final_answer({'is_normal': 'no' if p < 0.05 else 'yes'})"
        in first
    )
    assert result.status == "success" and result.answer == {"is_normal": "no"}


def test_a_fix_that_derives_the_verdict_from_a_computed_result_succeeds():
    # DABench 304: `normal = p >= 0.05` after `p = shapiro(...).pvalue`: a comparison (no call) of a computed value
    # was taken for a typed answer, the held step's backwards line was read with it, and the right answer failed
    result = _run([TEST + "normal = 'yes' if p < 0.05 else 'no'\nfinal_answer({'is_normal': normal})",
                   TEST + "normal = 'yes' if p >= 0.05 else 'no'\nfinal_answer({'is_normal': normal})"])  # fmt: skip
    assert "reads the hypothesis test backwards" in result.trajectory.steps[0].observation
    assert result.status == "success" and result.answer == {"is_normal": "no"}, result.trajectory.error


@pytest.mark.parametrize("again", ["final_answer({'is_normal': 'yes'})", "final_answer(_final_answer)"])
def test_the_same_verdict_sent_again_is_not_a_success(again):
    result = _run([TEST + "final_answer({'is_normal': 'yes' if p < 0.05 else 'no'})", again])
    assert result.status == "failed_checks" and result.answer == {"is_normal": "yes"}
    assert "misreads the result" in result.trajectory.error


@pytest.mark.parametrize(
    "code",
    [
        "rmse = mean_squared_error(y_test, y_pred)",
        "from sklearn import metrics\nmodel_rmse = round(metrics.mean_squared_error(y, p), 2)",
        "mse = mean_squared_error(y, p)\nfinal_answer({'model_rmse': round(mse, 2)})",
        "final_answer({'RMSE': float(mean_squared_error(y, p))})",
    ],
)
def test_an_mse_named_rmse_is_found(code):
    assert unrooted(code)


@pytest.mark.parametrize(
    "code",
    [
        "rmse = np.sqrt(mean_squared_error(y, p))",
        "mse = mean_squared_error(y, p)\nrmse = mse ** 0.5\nfinal_answer({'rmse': rmse})",
        "mse = mean_squared_error(y, p)\nfinal_answer({'mse': mse})",
        "rmse = root_mean_squared_error(y, p)",
        "mse = mean_squared_error(y, p)\nmse = np.sqrt(mse)\nfinal_answer({'rmse': mse})",
    ],
)
def test_a_rooted_rmse_or_an_mse_named_mse_is_left_alone(code):
    assert unrooted(code) == []


def test_an_mse_sent_as_the_rmse_is_held_once_then_the_rooted_value_succeeds():
    # DABench 30: `rmse = mean_squared_error(y_test, y_pred)` sent as model_rmse (131440262.76), `success`
    fit = (
        "from sklearn.linear_model import LinearRegression\nfrom sklearn.metrics import mean_squared_error\n"
        "import numpy as np\nm = LinearRegression().fit(df[['x']], df['y'])\n"
    )
    df = pd.DataFrame({"x": [1.0, 2, 3, 4, 5], "y": [1.0, 3, 2, 5, 4]})
    for second, status in (
        ("final_answer({'rmse': round(float(np.sqrt(mean_squared_error(df.y, m.predict(df[['x']])))), 2)})", "success"),
        ("final_answer(_final_answer)", "failed_checks"),
    ):
        first = fit + "final_answer({'rmse': round(mean_squared_error(df.y, m.predict(df[['x']])), 2)})"
        agent = Agent(model=Scripted([f"```python\n{first}\n```", f"```python\n{fit}{second}\n```"]),
                      runtime=InProcessRuntime())  # fmt: skip
        agent.runtime.inject("df", df)
        result = agent.run("Fit y on x with linear regression; report the RMSE rounded to 2 decimals.")
        assert "an RMSE that is not rooted" in result.trajectory.steps[0].observation
        assert result.status == status, result.trajectory.error
        assert result.answer == ({"rmse": 0.85} if status == "success" else {"rmse": 0.72})  # MSE 0.72


def test_the_other_standard_deviation_than_the_task_names_is_held_once():
    # DABench 129: "population standard deviation" asked, pandas' sample .std() sent (49.69 for 49.67), `success`
    df = pd.DataFrame({"fare": [7.25, 71.28, 7.92, 53.1, 8.05]})
    task = "Report the population standard deviation of fare, rounded to 2 decimals."
    for second, status, answer in (
        ("final_answer(round(float(df['fare'].std(ddof=0)), 2))", "success", 27.29),
        ("final_answer(round(float(df['fare'].std()), 2))", "failed_checks", 30.51),
    ):
        agent = Agent(
            model=Scripted(
                ["```python\nfinal_answer(round(float(df['fare'].std()), 2))\n```", f"```python\n{second}\n```"],
                repeat_last=True,  # an echo of the held code is sampled again (twice) before it stands
            ),
            runtime=InProcessRuntime(),
        )
        agent.runtime.inject("df", df)
        result = agent.run(task)
        assert "the sample standard deviation (ddof=1); the task asks for the population one" in (
            result.trajectory.steps[0].observation
        )
        assert result.status == status and result.answer == answer, result.trajectory.error


@pytest.mark.parametrize(
    ("code", "flagged"),
    [
        ("skewness = kurtosis(df.x)", True),
        ("median_age = df.age.mean()", True),
        ("final_answer({'mean_price': df.price.median()})", True),
        ("variance_ratio = df.a.std() / df.b.std()", True),
        ("std_dev = np.sqrt(df.x.var())", False),  # a rooted variance is a std
        ("var_x = df.x.std() ** 2", False),
        ("mean_std = df.groupby('g').x.std().mean()", False),  # a name with two statistics says how they nest
        ("total = df.x.sum()\nmean = total / len(df)", False),  # computed by hand: no call to judge
        ("avg_count = df.groupby('g').size().mean()", False),
        ("sd = df.x.std(ddof=0)", False),
    ],
)
def test_a_value_named_for_one_statistic_and_computed_by_another(code, flagged):
    assert bool(cave.review.misreadings.other_statistic(code)) is flagged


def test_fisher_and_the_denominator_are_read_from_the_task():
    kurt = "k = kurtosis(df.x, fisher=False)"
    assert cave.review.misreadings.pearson_kurtosis("Fisher's definition", kurt)
    assert not cave.review.misreadings.pearson_kurtosis("Use Pearson's kurtosis (Fisher's is excess)", kurt)
    assert not cave.review.misreadings.pearson_kurtosis("Fisher's definition", "k = kurtosis(df.x)")
    task = "Divide A by B. Add a small constant (1e-10) to the denominator (B) to avoid dividing by zero."
    assert cave.review.misreadings.constant_not_in_denominator(task, "r = (df.A + 1e-10) / df.B")
    assert not cave.review.misreadings.constant_not_in_denominator(task, "r = df.A / (df.B + 1e-10)")
    assert not cave.review.misreadings.constant_not_in_denominator("Divide A by B.", "r = (df.A + 1e-10) / df.B")


@pytest.mark.parametrize(
    ("task", "code", "flagged"),
    [
        ("What share of orders are over $150?", "s = o[o.amount > 150].amount.sum() / o.amount.sum()", True),
        (
            "Fraction of all customers in the West?",
            "a = c[c.region == 'W']['spend'].sum()\ns = a / c['spend'].sum()",
            True,
        ),
        ("What share of revenue comes from big orders?", "s = o[o.amount > 150].amount.sum() / o.amount.sum()", False),
        ("What share of sales are returns?", "s = o[o.ret].sales.sum() / o.sales.sum()", False),
        ("Percentage of orders with a discount?", "s = o.discounted.sum() / len(o)", False),  # a count of 0/1 values
        ("What share of orders are over $150?", "s = len(o[o.amount > 150]) / len(o)", False),
        ("Share of units sold by orders over $150?", "s = o[o.amount > 150].units.sum() / o.units.sum()", False),
    ],
)
def test_a_share_of_rows_taken_as_a_ratio_of_sums_is_found(task, code, flagged):
    assert bool(cave.review.misreadings.sum_share(task, code)) is flagged


def test_a_share_of_orders_answered_as_the_share_of_the_amount_is_held_once_then_the_count_succeeds():
    # analyst suite, share_big_orders: the share of the amount (0.364) sent for the share of orders (0.175), `success`
    orders = pd.DataFrame({"amount": [200.0, 20.0, 30.0, 160.0, 10.0]})
    summed = "big = orders[orders['amount'] > 150]['amount'].sum()\nfinal_answer(big / orders['amount'].sum())"
    counted = "final_answer(len(orders[orders['amount'] > 150]) / len(orders))"
    # the count in variables and no call (analyst run at 38d195f: the held line of the step before was read with it)
    shaped = (
        "n = orders[orders['amount'] > 150].shape[0]\ntotal = orders.shape[0]\nshare = n / total\nfinal_answer(share)"
    )
    for second, status, answer in (
        (counted, "success", 0.4),
        (shaped, "success", 0.4),
        (summed, "failed_checks", 360 / 420),
    ):
        agent = Agent(
            model=Scripted([f"```python\n{summed}\n```", f"```python\n{second}\n```"], repeat_last=True),
            runtime="inprocess",
        )
        agent.runtime.inject("orders", orders)
        result = agent.run("What share of orders are over $150?")
        obs = result.trajectory.steps[0].observation
        assert "the task asks for a share of rows" in obs and "len(orders[orders['amount'] > 150]) / len(orders)" in obs
        assert result.status == status and result.answer == pytest.approx(answer), result.trajectory.error


@pytest.mark.parametrize(
    ("task", "code", "flagged"),
    [
        ("What fraction of requests failed with a server error?", "bad = r[r['status'] == 404]", True),
        ("How many server-side errors were logged?", "n = (r.status >= 400).sum()", True),
        ("What fraction of requests failed with a server error?", "bad = r[r.status >= 500]", False),
        (
            "What fraction of requests failed with a server error?",
            "bad = r[(r.status >= 500) & (r.status < 600)]",
            False,
        ),
        ("How many client errors?", "n = ((r.status >= 400) & (r.status < 500)).sum()", False),
        ("How many client errors?", "n = (r.status == 503).sum()", True),
        ("How many requests returned 404?", "n = (r.status == 404).sum()", False),  # no error class named
    ],
)
def test_an_http_status_of_the_other_class_than_the_errors_the_task_names_is_found(task, code, flagged):
    assert bool(cave.review.misreadings.http_class(task, code)) is flagged


def test_a_client_error_sent_for_server_errors_is_held_once():
    # analyst suite, server_error_share: `requests['status'] == 404` for "failed with a server error" (0.05 for 0.065)
    requests = pd.DataFrame({"status": [200, 404, 500, 503, 200, 404, 404, 200]})
    task = "What fraction of requests failed with a server error?"
    wrong = "bad = requests[requests['status'] == 404]\nfinal_answer(len(bad) / len(requests))"
    right = "final_answer(float((requests['status'] >= 500).mean()))"
    agent = Agent(model=Scripted([f"```python\n{wrong}\n```", f"```python\n{right}\n```"]), runtime="inprocess")
    agent.runtime.inject("requests", requests)
    result = agent.run(task)
    assert "selects 404, a client error (the task asks about server errors)" in result.trajectory.steps[0].observation
    assert result.status == "success" and result.answer == 0.25


@pytest.mark.parametrize(
    ("task", "code", "flagged"),
    [
        ("Mean for the years 2000 and beyond.", "m = df[df['Year'] > 2000].x.mean()", True),
        ("Mean for the years 2000 and beyond.", "m = df[df['Year'] >= 2000].x.mean()", False),
        ("Brands with at least 10 hotels.", "b = counts[counts > 10]", True),
        ("Passengers aged 65 or older.", "o = df[df.Age > 65]", True),
        ("Orders of at most 3 items.", "o = df[df['items'] < 3]", True),
        ("Orders of at most 3 items.", "o = df[df['items'] <= 3]", False),
        ("Ages above 65.", "o = df[df.Age > 65]", False),  # "above 65" leaves 65 out itself
        ("Ages above 65.", "o = df[df.Age >= 65]", True),
        ("Hotels with more than 100 reviews.", "h = df[100 <= df.reviews]", True),
        ("Hotels with no more than 100 reviews.", "h = df[df.reviews <= 100]", False),
        ("Passengers under 18.", "k = df[df.Age <= 18]", True),
        ("Ratings between 3 and 4.", "m = df[(df.r >= 3) & (df.r < 4)]", True),
        ("Ratings between 3 and 4.", "m = df[df.r.between(3, 4)]", False),
        ("Ratings between 3 and 4.", "m = df[(3 <= df.r) & (df.r <= 4)]", False),
        ("Ratings between 3 and 4.", "m = df[3 < df.r <= 4]", True),  # a chained comparison is two
        # bins that share an end: "between 0 and 10, between 10 and 20" is half-open by necessity
        ("Counts between 0 and 10 and between 10 and 20.", "a = df[(df.n >= 0) & (df.n < 10)]", False),
        # the answer's range, not a filter
        ("Report the accuracy, a number between 0 and 1.", "ok = acc > 0", False),
        # a threshold with decimals compares a continuous value: both readings agree
        ("Is the p-value greater than 0.05?", "normal = p >= 0.05", False),
        ("Do more than 4 or equal to 4 apply?", "x = n >= 4", False),
    ],
)
def test_a_comparison_that_reads_a_bound_of_the_task_the_other_way_is_found(task, code, flagged):
    assert bool(cave.review.misreadings.misread_bound(task, code)) is flagged


def test_ratings_between_3_and_4_and_above_4_are_held_once_with_both_comparisons():
    # DABench 513: "below 3, between 3 and 4, and above 4" read as < 3, [3, 4), >= 4: two of three answers wrong
    df = pd.DataFrame({"r": [2.0, 3.0, 3.5, 4.0, 4.0, 4.5, 5.0], "n": [1, 2, 3, 4, 5, 6, 7]})
    task = (
        "Count the hotels with a rating between 3 and 4, and above 4. Answer with final_answer({'mid': m, 'high': h})."
    )
    wrong = "final_answer({'mid': int(((df.r >= 3) & (df.r < 4)).sum()), 'high': int((df.r >= 4).sum())})"
    right = "final_answer({'mid': int(df.r.between(3, 4).sum()), 'high': int((df.r > 4).sum())})"
    agent = Agent(model=Scripted([f"```python\n{wrong}\n```", f"```python\n{right}\n```"]), runtime="inprocess")
    agent.runtime.inject("df", df)
    result = agent.run(task)
    seen = result.trajectory.steps[0].observation
    assert "leaves 4 out; the task says 'between 3 and 4'" in seen and "takes 4 in; the task says 'above 4'" in seen
    assert result.status == "success" and result.answer == {"mid": 4, "high": 2}


def test_a_mean_over_years_after_2000_for_2000_and_beyond_is_held_once():
    # DABench 496: "for the years 2000 and beyond", df['Year'] > 2000: mean 124.18 sent for 125.11, `success`
    df = pd.DataFrame({"Year": [1999, 2000, 2001, 2002], "x": [1.0, 4.0, 6.0, 8.0]})
    task = "Mean of x for the years 2000 and beyond."
    strict = "final_answer(float(df[df['Year'] > 2000].x.mean()))"
    for second, status, answer in (("final_answer(float(df[df['Year'] >= 2000].x.mean()))", "success", 6.0),
                                   (strict, "failed_checks", 7.0)):  # fmt: skip
        agent = Agent(
            model=Scripted([f"```python\n{strict}\n```", f"```python\n{second}\n```"], repeat_last=True),
            runtime="inprocess",
        )
        agent.runtime.inject("df", df)
        result = agent.run(task)
        assert "leaves 2000 out; the task says '2000 and beyond'" in result.trajectory.steps[0].observation
        assert result.status == status and result.answer == answer


@pytest.mark.parametrize(
    ("task", "codes", "unapplied"),
    [
        ("Brands with at least 10 hotels.", ["b = counts.idxmax()"], ["'at least 10 hotels': no code uses 10"]),
        ("Brands with at least 10 hotels.", ["n = counts[counts >= 10]", "b = n.idxmax()"], []),  # an earlier step
        ("Orders over 5 items.", ["d = pd.read_sql('SELECT * FROM o WHERE items > 5', db)"], []),  # in the SQL
        ("Round to at most 2 decimal places.", ["x = round(m, 3)"], []),  # a form, not a filter
        ("The accuracy, a float between 0 and 1.", ["a = acc"], []),  # the answer's range
        ("Mean and std should be greater than 0 and less than 1.", ["m = x.mean()"], []),
        ("Count the values above 10.", ["n = len(x)"], ["'above 10': no code uses 10"]),
    ],
)
def test_a_bound_of_the_task_that_no_code_of_the_run_applies_is_found(task, codes, unapplied):
    assert cave.review.bounds.unapplied_bounds(task, codes) == unapplied


def test_an_answer_from_code_that_never_applies_a_bound_is_held_once_then_kept():
    # DABench 510: "only brands with at least 10 hotels" never applied: the wrong brand, `success`
    hotels = pd.DataFrame({"brand": ["A"] * 2 + ["B"] * 10, "stars": [5.0, 5.0] + [4.0] * 10})
    task = "Which brand has the highest average star rating? Only consider brands with at least 10 hotels."
    unfiltered = "final_answer(hotels.groupby('brand').stars.mean().idxmax())"
    filtered = "c = hotels.brand.value_counts()\nok = hotels[hotels.brand.isin(c[c >= 10].index)]\n" + (
        "final_answer(ok.groupby('brand').stars.mean().idxmax())"
    )
    for second, status, answer in ((filtered, "success", "B"), (unfiltered, "failed_checks", "A")):
        result = _run_on(hotels, [unfiltered, second], task, name="hotels")
        assert "'at least 10 hotels': no code uses 10" in result.trajectory.steps[0].observation
        assert result.status == status and result.answer == answer


def test_a_test_unpacked_with_the_p_value_first_is_held_once():
    # DABench 684: shapiro_p_value, distribution_type = shapiro(x): Shapiro's W sent as the p-value, `success`
    df = pd.DataFrame({"h": [0.2, 0.4, 0.1, 0.9, 0.5, 0.3, 0.7, 0.6]})
    task = "Report the Shapiro-Wilk p-value of h. Call final_answer({'p_value': p})."
    wrong = "p_value, stat = shapiro(df.h)\nfinal_answer({'p_value': round(float(p_value), 4)})"
    right = "stat, p_value = shapiro(df.h)\nfinal_answer({'p_value': round(float(p_value), 4)})"
    result = _run_on(df, [f"from scipy.stats import shapiro\n{wrong}", right], task)
    assert "gives p_value the statistic, not the p-value" in result.trajectory.steps[0].observation
    assert result.status == "success" and result.answer["p_value"] > 0.5  # W would be about 0.97 too: p differs


@pytest.mark.parametrize(
    ("code", "flagged"),
    [
        # DABench 668: the correlation computed twice, the second named the p-value: 0.1333 sent for 0.0324
        ("r, p_value = df.a.corr(df.b), df.a.corr(df.b, method='pearson')", True),
        ("p_value = df.a.corr(df.b, method='spearman')", True),
        ("r, p_value = pearsonr(df.a, df.b)", False),
        ("p_value = np.mean(permuted >= observed)", False),  # a permutation test's p-value is a mean
    ],
)
def test_a_correlation_named_as_the_p_value_is_found(code, flagged):
    assert bool(cave.review.misreadings.other_statistic(code)) is flagged


def test_the_same_answer_computed_again_by_fixed_code_stands():
    # DABench 116: held for pandas' sample std where the task says population; the fixed code finds no outlier
    # either: the same (empty) answer, computed again, is a success, not "still misreads" (nor "it is empty")
    df = pd.DataFrame({"country": list("abcdefgh"), "score": [5.0, 5.1, 4.9, 5.2, 4.8, 5.0, 5.1, 4.9]})
    task = (
        "Are there any outliers in the scores? If so, which countries? Use z-scores with the population standard "
        "deviation; |z| > 3 is an outlier. Call final_answer({'outliers': [...]})."
    )
    z = "z = (df.score - df.score.mean()) / df.score.std({})\n"
    send = "final_answer({'outliers': df[z.abs() > 3].country.tolist()})"
    result = _run_on(df, [z.format("") + send, z.format("ddof=0") + send], task)
    assert "the task asks for the population one" in result.trajectory.steps[0].observation
    assert result.status == "success" and result.answer == {"outliers": []}, result.trajectory.error
    typed = _run_on(df, [z.format("") + send, "final_answer({'outliers': []})"], task)
    assert typed.status == "failed_checks"  # typed in again: nothing was computed with the fix


@pytest.mark.parametrize(
    ("task", "code", "flagged"),
    [
        ("Set the random_state to 42 when splitting.", "m = DecisionTreeRegressor(max_depth=5)", True),  # 674
        ("Use a random seed of 42 for reproducibility.", "a, b = train_test_split(X, test_size=0.3)", True),
        ("Use a random seed of 42.", "m = KMeans(n_clusters=3, random_state=42)", False),
        ("Use a random seed of 42.", "m = LinearRegression().fit(X, y)", False),  # nothing drawn at random
        ("Fit a decision tree.", "m = DecisionTreeRegressor()", False),  # no random state fixed by the task
        ("Use random_state 42.", "m = RandomForestClassifier(**params)", False),  # it may be in **params
    ],
)
def test_a_step_that_draws_at_random_without_the_tasks_random_state_is_found(task, code, flagged):
    assert bool(cave.review.misreadings.unseeded(task, code)) is flagged
    assert bool(cave.review.misreadings.found(code, task)) is flagged


@pytest.mark.parametrize(
    ("task", "codes", "flagged"),
    [
        ("GDP per capita in logarithmic scale (base 10).", ["df['log_gdp'] = df.gdp.apply(lambda x: x)"], True),  # 733
        ("Apply a natural log transformation.", ["df['x'] = np.log(df['x'])"], False),
        ("Apply a log transformation.", ["t = df.x.transform(np.log1p)"], False),
        ("If the p-value is less than 0.05, apply a log transformation.", ["p = shapiro(df.x).pvalue"], False),
        ("Take the square root of the variance.", ["s = v ** 0.5"], False),
        ("Take the square root of the variance.", ["s = v"], True),
        ("Move log.txt to archive, then grep the log file for 'Error'.", ["mv('log.txt', 'archive')"], False),  # BFCL
    ],
)
def test_an_operation_the_task_names_that_no_code_does_is_found(task, codes, flagged):
    assert bool(cave.review.bounds.unapplied_operations(task, codes)) is flagged


def test_a_misread_bound_comes_with_the_code_that_reads_it_the_tasks_way():
    # DABench 513: told "`r < 4` leaves 4 out ... r <= 4", the 1.5B rewrote the other side of the range instead
    task = "Correlation for ratings between 3 and 4, and above 4."
    code = "mid = df[(df.r >= 3) & (df.r < 4)].x.mean()\nhigh = df[df.r >= 4].x.mean()\nfinal_answer({'mid': mid, 'high': high})"
    note = cave.review.misreadings.note(code, task)
    assert "Your code with each bound read as the task says (run it):" in note
    assert "mid = df[(df.r >= 3) & (df.r <= 4)].x.mean()\nhigh = df[df.r > 4].x.mean()\nfinal_answer(" in note


def test_a_test_unpacked_the_wrong_way_comes_with_the_code_that_unpacks_it_in_order():
    # DABench 684 (at 3e37ffe): told scipy's order in words, the 1.5B wrote `p_value, stat = shapiro(x)`
    code = "p_value, stat = shapiro(df.x)\nfinal_answer({'p': round(p_value, 4)})"
    note = cave.review.misreadings.note(code, "Shapiro-Wilk p-value of x")
    assert "gives p_value the statistic" in note
    assert "```python\nstat, p_value = shapiro(df.x)\nfinal_answer({'p': round(p_value, 4)})\n```" in note
