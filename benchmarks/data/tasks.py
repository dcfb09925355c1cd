"""Data-intensive tasks: a question over generated data, its exact reference answer, the checker.

Answers are numbers rounded to 2 decimals, names, or small tables ({key: number}). ``check``
accepts what each agent naturally returns: the code agent's live object (a float, a numpy
scalar, a pandas Series or DataFrame) or the JSON agent's text (JSON, or a number/name in prose).

>>> t = TASKS["sales_total_revenue"]
>>> ref = t.reference(100, 0)
>>> check(ref, ref, t.kind), check(f"The total is {ref}.", ref, t.kind), check(ref + 1, ref, t.kind)
(True, True, False)
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any

import pandas as pd
from cave.benchmarks.data import generate as g


@dataclass(frozen=True)
class DataTask:
    id: str
    dataset: str  # "sales" | "logs" | "shop" (SQLite)
    question: str
    kind: str  # "number" | "name" | "table"
    code: str  # the fixed scripted policy of the code agent: Python that leaves the answer in `result`
    json_query: str = ""  # shop tasks: the SQL the fixed JSON policy runs to fetch rows

    def reference(self, n: int, seed: int = 0) -> Any:
        return REFERENCES[self.id](n, seed)


def _sales_total(n: int, seed: int) -> float:
    return round(float(g.sales(n, seed)["revenue"].sum()), 2)


def _sales_by_region(n: int, seed: int) -> dict[str, float]:
    s = g.sales(n, seed).groupby("region")["revenue"].sum()
    return {str(k): round(float(v), 2) for k, v in s.items()}


def _logs_error_rate(n: int, seed: int) -> float:
    return round(float((g.logs(n, seed)["level"] == "ERROR").mean() * 100), 2)


def _logs_slowest(n: int, seed: int) -> str:
    return str(g.logs(n, seed).groupby("service")["latency_ms"].mean().idxmax())


def _shop_top_customer(n: int, seed: int) -> str:
    o, c = g.orders(n, seed), g.customers(n, seed)
    totals = o.groupby("customer_id")["amount"].sum()
    return str(c.set_index("customer_id").loc[int(totals.idxmax()), "name"])


REFERENCES = {
    "sales_total_revenue": _sales_total,
    "sales_revenue_by_region": _sales_by_region,
    "logs_error_rate": _logs_error_rate,
    "logs_slowest_service": _logs_slowest,
    "shop_top_customer": _shop_top_customer,
}

TASKS: dict[str, DataTask] = {
    t.id: t
    for t in [
        DataTask(
            "sales_total_revenue",
            "sales",
            "What is the total revenue of all orders in the sales data? Answer with the number rounded to 2 decimals.",
            "number",
            "result = round(float(sales['revenue'].sum()), 2)",
        ),
        DataTask(
            "sales_revenue_by_region",
            "sales",
            "What is the total revenue per region in the sales data? Answer with a mapping from region to revenue, "
            "each rounded to 2 decimals.",
            "table",
            "result = sales.groupby('region')['revenue'].sum().round(2)",
        ),
        DataTask(
            "logs_error_rate",
            "logs",
            "What percentage of the log entries have level ERROR? Answer with the percentage rounded to 2 decimals.",
            "number",
            "result = round(float((logs['level'] == 'ERROR').mean() * 100), 2)",
        ),
        DataTask(
            "logs_slowest_service",
            "logs",
            "Which service has the highest mean latency_ms in the logs? Answer with the service name.",
            "name",
            "result = logs.groupby('service')['latency_ms'].mean().idxmax()",
        ),
        DataTask(
            "shop_top_customer",
            "shop",
            "In the shop database (tables customers and orders), which customer has the highest total order amount? "
            "Answer with the customer's name.",
            "name",
            "result = db.execute('SELECT c.name FROM orders o JOIN customers c USING (customer_id) "
            "GROUP BY c.customer_id ORDER BY SUM(o.amount) DESC LIMIT 1').fetchone()[0]",
            json_query="SELECT o.order_id, o.customer_id, c.name, o.amount FROM orders o JOIN customers c USING (customer_id)",
        ),
    ]
}


# -- checking -------------------------------------------------------------------------------------------
def check(answer: Any, reference: Any, kind: str) -> bool:
    """Exact check of ``answer`` against ``reference`` (numbers compared at 2 decimals)."""
    if kind == "table":
        table = as_table(answer)
        return (
            table is not None
            and set(table) == set(reference)
            and all(_same_number(table[k], reference[k]) for k in reference)
        )
    if kind == "number":
        x = _as_number(answer)
        return x is not None and _same_number(x, reference)
    text = _as_text(answer)
    return text is not None and (text.casefold() == str(reference).casefold() or _word_in(str(reference), text))


def _same_number(x: Any, ref: float) -> bool:
    try:
        return round(float(x), 2) == round(float(ref), 2)
    except (TypeError, ValueError):
        return False


def _as_number(answer: Any) -> float | None:
    if isinstance(answer, bool):
        return None
    if isinstance(answer, (int, float)) or type(answer).__module__ == "numpy":
        try:
            return float(answer)
        except (TypeError, ValueError):
            return None
    if isinstance(answer, str):
        parsed = _loads(answer)
        if isinstance(parsed, (int, float)) and not isinstance(parsed, bool):
            return float(parsed)
        numbers = re.findall(r"-?\d[\d,]*\.?\d*", answer)
        if numbers:
            return float(numbers[-1].replace(",", "").rstrip("."))
    return None


def as_table(answer: Any) -> dict[str, Any] | None:
    """A table answer as {key: value}: a two-column frame (key, value), a one-column frame or Series by its
    index, a dict, JSON text of one, or a list of two-key records; None for anything else."""
    if isinstance(answer, pd.DataFrame):
        if answer.shape[1] == 1:
            answer = answer.iloc[:, 0]
        elif answer.shape[1] == 2:
            answer = answer.set_index(answer.columns[0]).iloc[:, 0]
        else:
            return None
    if isinstance(answer, pd.Series):
        return {str(k): v for k, v in answer.items()}
    if isinstance(answer, str):
        answer = _loads(answer) if _loads(answer) is not None else _loads(_json_span(answer))
    if isinstance(answer, dict):
        return {str(k): v for k, v in answer.items()}
    if isinstance(answer, list) and all(isinstance(r, dict) and len(r) == 2 for r in answer):
        return {str(list(r.values())[0]): list(r.values())[1] for r in answer}
    return None


def _as_text(answer: Any) -> str | None:
    if isinstance(answer, str):
        parsed = _loads(answer)
        return (parsed if isinstance(parsed, str) else answer).strip().strip(".\"'` ")
    if answer is None:
        return None
    return str(answer)


def _word_in(word: str, text: str) -> bool:
    return re.search(rf"(?<!\w){re.escape(word)}(?!\w)", text, re.I) is not None


def _loads(text: str) -> Any:
    try:
        return json.loads(text)
    except (json.JSONDecodeError, TypeError):
        return None


def _json_span(text: str) -> str:
    start, end = text.find("{"), text.rfind("}")
    return text[start : end + 1] if 0 <= start < end else ""
