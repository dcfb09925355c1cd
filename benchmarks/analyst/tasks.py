"""The analyst tasks: questions phrased the way analysts write them, each with its oracle.

A task names the objects it is handed (frames of ``generate.FRAMES``, or ``db``: a SQLAlchemy engine on the
shop's SQLite file), the question, the kind of answer (see ``compare``), the oracle (a function of the seed,
computed here from the same generated data, never a stored number), a correct solution (Python for the code
agent's scripted policy: it checks the oracle from a second direction), and, for about a third of the tasks,
output ``checks`` the way a user writes them in a task file (a type, columns, a row count).

>>> t = TASKS["top_region"]
>>> t.check(t.reference(0), 0), t.check("nowhere", 0)
(True, False)
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import pandas as pd
from cave.benchmarks.analyst import generate as g
from cave.benchmarks.analyst.compare import same

CATEGORIES = ("pandas", "sql", "cleaning", "join", "timeseries", "scalar", "which")


@dataclass(frozen=True)
class AnalystTask:
    id: str
    category: str
    inputs: tuple[str, ...]  # frame names of generate.FRAMES, and/or "db"
    question: str
    kind: str  # an answer kind of compare.KINDS
    oracle: Callable[[int], Any]
    solution: str  # Python that calls final_answer with the right answer (the scripted correct policy)
    checks: Callable[[Any], dict[str, Any]] | None = None  # the reference -> {name: CheckSpec mapping}
    candidates: Callable[[int], list[str]] = field(default=lambda seed: [])
    keys: str = "text"  # how a table's keys are read: text or month

    def reference(self, seed: int = 0) -> Any:
        return self.oracle(seed)

    def check_specs(self, seed: int = 0) -> dict[str, Any]:
        return self.checks(self.reference(seed)) if self.checks else {}

    def check(self, answer: Any, seed: int = 0) -> bool:
        return same(answer, self.reference(seed), self.kind, candidates=self.candidates(seed), keys=self.keys)


# -- oracles -------------------------------------------------------------------------------------------
def _year(frame: pd.DataFrame, year: int) -> pd.DataFrame:
    return frame[pd.to_datetime(frame["date"]).dt.year == year]


def _top_customers_2025(seed: int) -> list[str]:
    o = _year(g.orders(seed), 2025).merge(g.customers(seed), on="customer_id")
    return list(o.groupby("name")["amount"].sum().nlargest(3).index)


def _monthly(frame: pd.DataFrame, column: str, how: str = "sum") -> dict[str, float]:
    month = pd.to_datetime(frame["date"]).dt.strftime("%Y-%m")
    s = frame.groupby(month)[column].agg(how)
    return {str(k): float(v) for k, v in s.items()}


def _by(frame: pd.DataFrame, key: str, column: str, how: str = "sum") -> dict[str, float]:
    return {str(k): float(v) for k, v in frame.groupby(key)[column].agg(how).items()}


def _argmax(mapping: dict[str, float]) -> str:
    return max(mapping, key=mapping.__getitem__)


def _product_rise(seed: int) -> str:
    s = g.sales(seed)
    s["revenue"] = s["units"] * s["unit_price"]
    q = pd.to_datetime(s["date"]).dt.quarter
    by = s.groupby([q, "product"])["revenue"].sum().unstack(0)
    return str((by[2] - by[1]).idxmax())


def _p95(seed: int) -> dict[str, float]:
    return {str(k): float(v) for k, v in g.requests(seed).groupby("service")["latency_ms"].quantile(0.95).items()}


def _orphans(seed: int) -> pd.DataFrame:
    o = g.orders(seed)
    return o[~o["customer_id"].isin(g.customers(seed)["customer_id"])]


def _city_revenue(seed: int) -> dict[str, float]:
    return _by(g.orders(seed).merge(g.customers(seed), on="customer_id"), "city", "amount")


def _clean_signups(seed: int) -> pd.DataFrame:
    truth = g.signups_truth(seed)
    raw = g.signups(seed).drop_duplicates("user_id").set_index("user_id")
    keep = raw.loc[truth["user_id"], "email"].notna().to_numpy()
    return truth.loc[keep, ["user_id", "email", "signup_date"]].reset_index(drop=True)


def _users_per_country(seed: int) -> dict[str, float]:
    return {k.lower(): float(v) for k, v in g.signups_truth(seed).groupby("country")["user_id"].nunique().items()}


def _monthly_revenue_jump(seed: int) -> str:
    m = g.traffic(seed).set_index("date")["revenue"].resample("MS").sum()
    return m.diff().idxmax().strftime("%Y-%m")


def _names(seed: int) -> list[str]:
    return list(g.customers(seed)["name"])


def _rows(ref: Any) -> dict[str, Any]:
    """The check a user writes when they know how many rows the answer has."""
    return {"answer": {"rows": len(ref)}}


SERVICES = lambda seed: list(g.SERVICES)  # noqa: E731
_HEAD = "import pandas as pd\n"

# -- the tasks -------------------------------------------------------------------------------------------
_TASKS = [
    # pandas over the shop's frames
    AnalystTask(
        "top_customers_2025",
        "pandas",
        ("orders", "customers"),
        "Find the 3 customers with the highest total in 2025.",
        "names",
        _top_customers_2025,
        "o = orders[orders['date'].str.startswith('2025')].merge(customers, on='customer_id')\n"
        "final_answer(list(o.groupby('name')['amount'].sum().nlargest(3).index))",
        checks=_rows,
        candidates=_names,
    ),
    AnalystTask(
        "revenue_per_month_2025",
        "timeseries",
        ("orders",),
        "revenue per month in 2025",
        "table",
        lambda seed: _monthly(_year(g.orders(seed), 2025), "amount"),
        _HEAD + "o = orders.assign(date=pd.to_datetime(orders['date']))\n"
        "final_answer(o[o['date'].dt.year == 2025].resample('ME', on='date')['amount'].sum())",
        checks=_rows,
        keys="month",
    ),
    AnalystTask(
        "top_region",
        "which",
        ("orders",),
        "Which region brought in the most revenue?",
        "name",
        lambda seed: _argmax(_by(g.orders(seed), "region", "amount")),
        "final_answer(orders.groupby('region')['amount'].sum().idxmax())",
        candidates=lambda seed: list(g.REGIONS),
    ),
    AnalystTask(
        "avg_order_value",
        "scalar",
        ("orders",),
        "What's our average order value?",
        "number",
        lambda seed: float(g.orders(seed)["amount"].mean()),
        "final_answer(round(float(orders['amount'].mean()), 2))",
        checks=lambda ref: {"answer": {"type": "number"}},
    ),
    AnalystTask(
        "orders_2024",
        "scalar",
        ("orders",),
        "how many orders did we get in 2024?",
        "count",
        lambda seed: len(_year(g.orders(seed), 2024)),
        "final_answer(int(orders['date'].str.startswith('2024').sum()))",
    ),
    AnalystTask(
        "share_big_orders",
        "scalar",
        ("orders",),
        "What share of orders are over $150?",
        "share",
        lambda seed: float((g.orders(seed)["amount"] > 150).mean()),
        "final_answer(float((orders['amount'] > 150).mean()))",
    ),
    AnalystTask(
        "product_rise",
        "which",
        ("sales",),
        "Which product rose most from Q1 to Q2?",
        "name",
        _product_rise,
        _HEAD
        + "s = sales.assign(revenue=sales['units'] * sales['unit_price'], q=pd.to_datetime(sales['date']).dt.quarter)\n"
        "by = s.pivot_table(index='product', columns='q', values='revenue', aggfunc='sum')\n"
        "final_answer((by[2] - by[1]).idxmax())",
        candidates=lambda seed: list(g.PRODUCTS),
    ),
    AnalystTask(
        "service_medians",
        "pandas",
        ("requests",),
        "median latency per service",
        "table",
        lambda seed: _by(g.requests(seed), "service", "latency_ms", "median"),
        "final_answer(requests.groupby('service')['latency_ms'].median())",
        checks=_rows,
    ),
    AnalystTask(
        "worst_p95",
        "which",
        ("requests",),
        "Which service has the worst p95 latency?",
        "name",
        lambda seed: _argmax(_p95(seed)),
        "final_answer(requests.groupby('service')['latency_ms'].quantile(0.95).idxmax())",
        candidates=SERVICES,
    ),
    AnalystTask(
        "server_error_share",
        "scalar",
        ("requests",),
        "What fraction of requests failed with a server error?",
        "share",
        lambda seed: float((g.requests(seed)["status"] >= 500).mean()),
        "final_answer(float((requests['status'] >= 500).mean()))",
    ),
    AnalystTask(
        "busiest_hour",
        "timeseries",
        ("requests",),
        "What hour of the day gets the most requests?",
        "count",
        lambda seed: int(g.requests(seed)["timestamp"].dt.hour.value_counts().idxmax()),
        "final_answer(int(requests['timestamp'].dt.hour.value_counts().idxmax()))",
    ),
    # SQL through the injected engine
    AnalystTask(
        "sql_top_customers_2025",
        "sql",
        ("db",),
        "Who were our top 3 customers by total spend in 2025?",
        "names",
        _top_customers_2025,
        _HEAD + 'final_answer(list(pd.read_sql("SELECT c.name, SUM(o.amount) AS total FROM orders o '
        "JOIN customers c ON c.customer_id = o.customer_id WHERE o.date LIKE '2025-%' "
        'GROUP BY c.name ORDER BY total DESC LIMIT 3", db)["name"]))',
        checks=_rows,
        candidates=_names,
    ),
    AnalystTask(
        "sql_orders_per_month_2025",
        "sql",
        ("db",),
        "How many orders came in each month of 2025?",
        "table",
        lambda seed: _monthly(_year(g.orders(seed), 2025), "order_id", "count"),
        _HEAD + 'final_answer(pd.read_sql("SELECT substr(date, 1, 7) AS month, COUNT(*) AS n FROM orders '
        "WHERE date LIKE '2025-%' GROUP BY month\", db))",
        checks=_rows,
        keys="month",
    ),
    AnalystTask(
        "sql_biggest_city",
        "sql",
        ("db",),
        "Which city has the most customers?",
        "name",
        lambda seed: str(g.customers(seed)["city"].value_counts().idxmax()),
        _HEAD + "final_answer(pd.read_sql('SELECT city FROM customers GROUP BY city ORDER BY COUNT(*) DESC LIMIT 1', "
        "db)['city'][0])",
        candidates=lambda seed: list(g.CITIES),
    ),
    AnalystTask(
        "sql_never_ordered",
        "sql",
        ("db",),
        "How many customers have never placed an order?",
        "count",
        lambda seed: int((~g.customers(seed)["customer_id"].isin(g.orders(seed)["customer_id"])).sum()),
        _HEAD + "final_answer(int(pd.read_sql('SELECT COUNT(*) AS n FROM customers WHERE customer_id NOT IN "
        "(SELECT customer_id FROM orders)', db)['n'][0]))",
    ),
    AnalystTask(
        "sql_city_spend",
        "sql",
        ("db",),
        "Total spend per customer city, for the customers we have on file.",
        "table",
        _city_revenue,
        _HEAD + "final_answer(pd.read_sql('SELECT c.city, SUM(o.amount) AS total FROM orders o JOIN customers c "
        "ON c.customer_id = o.customer_id GROUP BY c.city', db))",
        checks=_rows,
    ),
    AnalystTask(
        "sql_frequent_customers",
        "sql",
        ("db",),
        "How many customers ordered more than 10 times?",
        "count",
        lambda seed: int((g.orders(seed)["customer_id"].value_counts() > 10).sum()),
        _HEAD + "final_answer(len(pd.read_sql('SELECT customer_id FROM orders GROUP BY customer_id "
        "HAVING COUNT(*) > 10', db)))",
    ),
    # cleaning
    AnalystTask(
        "clean_signups",
        "cleaning",
        ("signups",),
        "Clean up the signups table: no duplicate rows, no rows without an email, emails trimmed and lowercase, "
        "and signup_date as real dates. Give me the cleaned table.",
        "frame",
        _clean_signups,
        _HEAD + "df = signups.drop_duplicates().dropna(subset=['email']).copy()\n"
        "df['email'] = df['email'].str.strip().str.lower()\n"
        "df['signup_date'] = pd.to_datetime(df['signup_date'], format='mixed')\n"
        "final_answer(df)",
        checks=lambda ref: {
            "answer": {
                "type": "DataFrame",
                "columns": ["user_id", "email", "signup_date"],
                "no_nulls": ["email"],
                "unique": ["user_id"],
                "dtypes": {"signup_date": "datetime"},
            }
        },
    ),
    AnalystTask(
        "unique_signups",
        "cleaning",
        ("signups",),
        "The signups export has duplicate rows. How many signups are there really?",
        "count",
        lambda seed: len(g.signups(seed).drop_duplicates()),
        "final_answer(len(signups.drop_duplicates()))",
    ),
    AnalystTask(
        "users_per_country",
        "cleaning",
        ("signups",),
        "How many users signed up from each country? (the country names are messy)",
        "table",
        _users_per_country,
        "c = signups['country'].str.strip().str.title()\nfinal_answer(signups.groupby(c)['user_id'].nunique())",
        checks=_rows,
    ),
    AnalystTask(
        "march_signups",
        "cleaning",
        ("signups",),
        "How many users signed up in March 2025? The dates are in a few different formats.",
        "count",
        lambda seed: int((g.signups_truth(seed)["signup_date"].dt.month == 3).sum()),
        _HEAD + "d = pd.to_datetime(signups['signup_date'], format='mixed')\n"
        "final_answer(signups.loc[(d.dt.year == 2025) & (d.dt.month == 3), 'user_id'].nunique())",
    ),
    AnalystTask(
        "payments_total",
        "cleaning",
        ("payments",),
        "What's the total amount paid? The amount column came in as text.",
        "number",
        g.payments_total,
        "a = payments['amount'].str.replace(r'[^0-9.]', '', regex=True)\n"
        "final_answer(round(float(a.replace('', None).astype(float).sum()), 2))",
    ),
    AnalystTask(
        "missing_emails",
        "cleaning",
        ("signups",),
        "How many users have no email address on file?",
        "count",
        lambda seed: int(g.signups(seed).drop_duplicates("user_id")["email"].isna().sum()),
        "final_answer(int(signups[signups['email'].isna()]['user_id'].nunique()))",
    ),
    # joins with orphan keys
    AnalystTask(
        "orphan_orders",
        "join",
        ("orders", "customers"),
        "How many orders reference a customer that isn't in the customers table?",
        "count",
        lambda seed: len(_orphans(seed)),
        "final_answer(int((~orders['customer_id'].isin(customers['customer_id'])).sum()))",
    ),
    AnalystTask(
        "city_revenue",
        "join",
        ("orders", "customers"),
        "Total order amount by customer city. Some orders point to customers we don't have; leave those out.",
        "table",
        _city_revenue,
        "final_answer(orders.merge(customers, on='customer_id').groupby('city')['amount'].sum())",
        checks=_rows,
    ),
    AnalystTask(
        "orphan_revenue",
        "join",
        ("orders", "customers"),
        "How much revenue comes from orders whose customer we don't have on file?",
        "number",
        lambda seed: float(_orphans(seed)["amount"].sum()),
        "m = orders.merge(customers, on='customer_id', how='left', indicator=True)\n"
        "final_answer(round(float(m.loc[m['_merge'] == 'left_only', 'amount'].sum()), 2))",
    ),
    # time series
    AnalystTask(
        "peak_month",
        "timeseries",
        ("traffic",),
        "Which month had the most visits?",
        "month",
        lambda seed: _argmax(_monthly(g.traffic(seed), "visits")),
        "final_answer(traffic.set_index('date')['visits'].resample('MS').sum().idxmax())",
    ),
    AnalystTask(
        "monthly_visits",
        "timeseries",
        ("traffic",),
        "Monthly visits, please.",
        "table",
        lambda seed: _monthly(g.traffic(seed), "visits"),
        "final_answer(traffic.groupby(traffic['date'].dt.to_period('M'))['visits'].sum())",
        checks=_rows,
        keys="month",
    ),
    AnalystTask(
        "rolling_peak",
        "timeseries",
        ("traffic",),
        "What's the highest 7-day rolling average of daily visits?",
        "number",
        lambda seed: float(g.traffic(seed)["visits"].rolling(7).mean().max()),
        "final_answer(float(traffic.sort_values('date')['visits'].rolling(7).mean().max()))",
    ),
    AnalystTask(
        "revenue_jump_month",
        "timeseries",
        ("traffic",),
        "In which month did revenue go up the most, in dollars, compared with the month before?",
        "month",
        _monthly_revenue_jump,
        "m = traffic.set_index('date')['revenue'].resample('ME').sum()\nfinal_answer(m.diff().idxmax())",
    ),
]

TASKS: dict[str, AnalystTask] = {t.id: t for t in _TASKS}
