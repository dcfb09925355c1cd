"""Seeded data for the analyst suite: the tables an analyst is handed, warts included.

Every table is a pure function of the seed, so a task's oracle recomputes its answer from the same data.

- ``customers`` / ``orders``: a shop over 2024-2025; a few orders point at customer ids that are not in
  ``customers`` (orphan keys), and some customers never ordered.
- ``sales``: product sales in the first half of 2025; one product clearly takes off in Q2.
- ``requests``: a week of service requests (latency, status); each service has its own latency scale.
- ``signups``: a messy export: duplicate rows, missing emails, emails with stray spaces and capitals,
  country names in mixed case with padding, dates in four formats.
- ``payments``: amounts stored as text (``"$1,234.50"``), some blank.
- ``traffic``: daily visits and revenue for 2025, with a seasonal peak.

>>> orders(0).equals(orders(0)), len(customers(0)), sorted(tables(0))[:3]
(True, 40, ['customers', 'orders', 'payments'])
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable
from functools import lru_cache, wraps
from pathlib import Path

import numpy as np
import pandas as pd
from cave.benchmarks.data.generate import FIRST, LAST, PRODUCTS, REGIONS, SERVICES

CITIES = ["Oslo", "Lima", "Pune", "Kyiv", "Accra", "Quito"]
COUNTRIES = ["Germany", "France", "Spain", "Italy", "Poland"]
N_CUSTOMERS = 40
CITY_SIZES = [12, 8, 6, 6, 4, 4]  # customers per city (cities shuffled): one clear biggest city
ORPHAN_IDS = (101, 102, 103, 104, 105)  # customer ids that orders use but `customers` lacks
DATE_FORMATS = ("%Y-%m-%d", "%Y/%m/%d", "%b %d %Y", "%d %B %Y")


def _table(make: Callable[[int], pd.DataFrame]) -> Callable[..., pd.DataFrame]:
    """A table generator, computed once per seed; every caller gets its own copy to change."""
    cached = lru_cache(maxsize=8)(make)

    @wraps(make)
    def table(seed: int = 0) -> pd.DataFrame:
        return cached(seed).copy()

    return table


def _rng(seed: int, salt: int) -> np.random.Generator:
    return np.random.default_rng([seed, salt])


def _days(rng: np.random.Generator, start: str, days: int, n: int) -> pd.DatetimeIndex:
    return pd.DatetimeIndex(pd.Timestamp(start) + pd.to_timedelta(rng.integers(0, days, n), unit="D"))


@_table
def customers(seed: int = 0) -> pd.DataFrame:
    """customer_id, name (unique), city."""
    rng = _rng(seed, 1)
    picks = rng.permutation(len(FIRST) * len(LAST))[:N_CUSTOMERS]
    return pd.DataFrame(
        {
            "customer_id": np.arange(1, N_CUSTOMERS + 1),
            "name": [f"{FIRST[i % len(FIRST)]} {LAST[i // len(FIRST)]}" for i in picks],
            "city": rng.permutation(np.repeat(rng.permutation(CITIES), CITY_SIZES)),
        }
    )


@_table
def orders(seed: int = 0) -> pd.DataFrame:
    """order_id, customer_id (a dozen point at no customer), date (YYYY-MM-DD, 2024-2025), product, region, amount."""
    rng = _rng(seed, 2)
    n = 400
    active = rng.permutation(np.arange(1, N_CUSTOMERS + 1))[: N_CUSTOMERS - 6]  # 6 customers never order
    weights = rng.gamma(1.5, 1.0, len(active))
    cid = rng.choice(active, n, p=weights / weights.sum())
    amount = np.round(rng.gamma(2.0, 45.0, n) + 5, 2)
    orphans = rng.choice(ORPHAN_IDS, 12)  # a dozen small orders of unknown customers
    frame = pd.DataFrame(
        {
            "customer_id": np.concatenate([cid, orphans]),
            "date": _days(rng, "2024-01-01", 731, n + len(orphans)).strftime("%Y-%m-%d"),
            "product": rng.choice(PRODUCTS, n + len(orphans)),
            "region": rng.choice(REGIONS, n + len(orphans)),
            "amount": np.concatenate([amount, np.round(rng.uniform(5, 40, len(orphans)), 2)]),
        }
    )
    frame = frame.sort_values("date", kind="stable").reset_index(drop=True)
    frame.insert(0, "order_id", np.arange(1, len(frame) + 1))
    return frame


@_table
def sales(seed: int = 0) -> pd.DataFrame:
    """date (2025-01..06), product, units, unit_price."""
    rng = _rng(seed, 3)
    products = list(PRODUCTS[:6])
    star = products[int(rng.integers(len(products)))]
    rows = []
    for quarter, start in ((1, "2025-01-01"), (2, "2025-04-01")):
        for p in products:
            factor = 1.0 if quarter == 1 else (1.9 if p == star else rng.uniform(0.8, 1.15))
            k = int(40 * factor)
            for day, units in zip(_days(rng, start, 90, k), rng.integers(1, 6, k), strict=True):
                rows.append((day.strftime("%Y-%m-%d"), p, int(units)))
    frame = pd.DataFrame(rows, columns=["date", "product", "units"]).sort_values("date", kind="stable")
    frame["unit_price"] = frame["product"].map({p: 20.0 + 15 * i for i, p in enumerate(products)})
    return frame.reset_index(drop=True)


@_table
def requests(seed: int = 0) -> pd.DataFrame:
    """timestamp (datetime64, one week), service, latency_ms, status (HTTP)."""
    rng = _rng(seed, 4)
    n = 600
    service = rng.choice(SERVICES, n)
    scale = {s: 40 + 30 * i for i, s in enumerate(rng.permutation(SERVICES))}
    latency = rng.gamma(3.0, np.array([scale[s] for s in service]) / 3.0).round().astype(int) + 1
    peak = int(rng.integers(9, 18))
    hour_weights = np.array([0.3 if h < 7 else 1.0 for h in range(24)])
    hour_weights[peak] = 3.0
    hours = rng.choice(24, n, p=hour_weights / hour_weights.sum())
    stamp = (
        pd.Timestamp("2025-03-03")
        + pd.to_timedelta(rng.integers(0, 7, n), unit="D")
        + pd.to_timedelta(hours, unit="h")
        + pd.to_timedelta(rng.integers(0, 3600, n), unit="s")
    )
    status = rng.choice([200, 200, 200, 200, 201, 404, 500, 503], n, p=[0.5, 0.2, 0.1, 0.05, 0.05, 0.04, 0.04, 0.02])
    frame = pd.DataFrame({"timestamp": stamp, "service": service, "latency_ms": latency, "status": status})
    return frame.sort_values("timestamp").reset_index(drop=True)


@_table
def signups_truth(seed: int = 0) -> pd.DataFrame:
    """The clean table the messy export came from (what a correct cleaning gets back)."""
    rng = _rng(seed, 5)
    n = 120
    first = rng.choice(FIRST, n)
    last = rng.choice(LAST, n)
    return pd.DataFrame(
        {
            "user_id": np.arange(1, n + 1),
            "email": [f"{f}.{s}{i}@example.com".lower() for i, (f, s) in enumerate(zip(first, last, strict=True))],
            "country": rng.choice(COUNTRIES, n, p=[0.3, 0.25, 0.2, 0.15, 0.1]),
            "signup_date": _days(rng, "2025-01-01", 181, n),
        }
    )


@_table
def signups(seed: int = 0) -> pd.DataFrame:
    """user_id, email (some missing; stray spaces, mixed case), country (mixed case, padded),
    signup_date (text in four formats); 14 rows are exact duplicates."""
    rng = _rng(seed, 6)
    truth = signups_truth(seed)
    n = len(truth)
    emails = [_mess_case(rng, e) for e in truth["email"]]
    emails = [f" {e}" if rng.random() < 0.2 else (f"{e}  " if rng.random() < 0.2 else e) for e in emails]
    missing = rng.random(n) < 0.1
    countries = [_mess_case(rng, c, pad=True) for c in truth["country"]]
    fmt = rng.integers(0, len(DATE_FORMATS), n)
    dates = [d.strftime(DATE_FORMATS[f]) for d, f in zip(truth["signup_date"], fmt, strict=True)]
    frame = pd.DataFrame(
        {
            "user_id": truth["user_id"],
            "email": [None if m else e for e, m in zip(emails, missing, strict=True)],
            "country": countries,
            "signup_date": dates,
        }
    )
    dupes = frame.iloc[rng.choice(n, 14, replace=False)]
    frame = pd.concat([frame, dupes]).iloc[rng.permutation(n + len(dupes))]
    return frame.reset_index(drop=True)


def _mess_case(rng: np.random.Generator, text: str, *, pad: bool = False) -> str:
    style = int(rng.integers(0, 4))
    text = [text, text.upper(), text.lower(), text.title()][style]
    if pad and rng.random() < 0.4:
        text = rng.choice([" ", "  "]) + text + rng.choice(["", " "])
    return text


@_table
def _payments(seed: int = 0) -> pd.DataFrame:
    rng = _rng(seed, 7)
    n = 150
    value = np.round(rng.gamma(2.0, 300.0, n), 2)
    blank = rng.random(n) < 0.08
    style = rng.integers(0, 4, n)
    text = [
        None if b else [f"${v:,.2f}", f"{v:.2f}", f" {v:,.2f} ", f"USD {v:,.2f}"][s]
        for v, b, s in zip(value, blank, style, strict=True)
    ]
    return pd.DataFrame({"payment_id": np.arange(1, n + 1), "amount": text, "_value": np.where(blank, 0.0, value)})


def payments(seed: int = 0) -> pd.DataFrame:
    """payment_id, amount (text: "$1,234.50", "1234.50", " 1,234.50 ", "USD 1,234.50"; about 8% blank)."""
    return _payments(seed).drop(columns="_value")


def payments_total(seed: int = 0) -> float:
    return float(_payments(seed)["_value"].sum())


@_table
def traffic(seed: int = 0) -> pd.DataFrame:
    """date (datetime64, every day of 2025), visits, revenue."""
    rng = _rng(seed, 8)
    days = pd.date_range("2025-01-01", "2025-12-31", freq="D")
    peak = int(rng.integers(3, 10))  # the busiest month
    month = days.month.to_numpy()
    season = 1000 + 600 * np.exp(-((month - peak) ** 2) / 2.0)
    weekday = np.where(days.day_of_week.to_numpy() >= 5, 0.7, 1.0)
    visits = np.round(season * weekday * rng.normal(1.0, 0.08, len(days))).astype(int)
    revenue = np.round(visits * rng.uniform(0.8, 1.2, len(days)) * 1.7, 2)
    return pd.DataFrame({"date": days, "visits": visits, "revenue": revenue})


FRAMES = {
    "customers": customers,
    "orders": orders,
    "sales": sales,
    "requests": requests,
    "signups": signups,
    "payments": payments,
    "traffic": traffic,
}


def tables(seed: int = 0) -> dict[str, pd.DataFrame]:
    """Every table of the suite, by name."""
    return {name: make(seed) for name, make in FRAMES.items()}


def make_db(seed: int, path: str | Path) -> Path:
    """The shop as a SQLite file at ``path``: tables customers and orders (the same rows as the frames)."""
    path = Path(path)
    path.unlink(missing_ok=True)
    con = sqlite3.connect(path)
    try:
        customers(seed).to_sql("customers", con, index=False)
        orders(seed).to_sql("orders", con, index=False)
        con.commit()
    finally:
        con.close()
    return path
