"""Seeded data for the data-intensive suite: sales orders, service logs, a SQLite shop database.

The same (rows, seed) always gives the same data, so a task's reference answer is a pure
function of it and a reward can recompute it later.

>>> df = sales(100, seed=1)
>>> df.shape, list(df.columns)
((100, 7), ['order_id', 'date', 'region', 'product', 'quantity', 'unit_price', 'revenue'])
>>> sales(100, seed=1).equals(df)
True
"""

from __future__ import annotations

import sqlite3
from functools import lru_cache
from pathlib import Path

import numpy as np
import pandas as pd

SIZES = (100, 1_000, 10_000, 100_000)
REGIONS = ["north", "south", "east", "west", "central"]
PRODUCTS = ["laptop", "phone", "tablet", "monitor", "keyboard", "mouse", "headset", "camera"]
PRICES = {
    "laptop": 999.0,
    "phone": 599.0,
    "tablet": 399.0,
    "monitor": 229.0,
    "keyboard": 49.0,
    "mouse": 25.0,
    "headset": 89.0,
    "camera": 449.0,
}
SERVICES = ["auth", "search", "checkout", "payments", "catalog", "email"]
LEVELS = ["INFO", "WARN", "ERROR"]
FIRST = ["Ada", "Bo", "Cy", "Dee", "Eli", "Fay", "Gus", "Hal", "Ida", "Jo", "Kai", "Liv", "Max", "Nia", "Oz", "Pia"]
LAST = ["Stone", "Reed", "Hart", "Lane", "Frost", "Vale", "Moss", "Wolfe", "Quinn", "Park", "Shaw", "Cole"]


@lru_cache(maxsize=16)
def _sales(n: int, seed: int) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    product = rng.choice(PRODUCTS, n)
    base = np.array([PRICES[p] for p in product])
    discount = rng.choice([1.0, 0.95, 0.9, 0.8], n, p=[0.6, 0.2, 0.15, 0.05])
    unit_price = np.round(base * discount, 2)
    quantity = rng.integers(1, 11, n)
    return pd.DataFrame(
        {
            "order_id": np.arange(1, n + 1),
            "date": (pd.Timestamp("2024-01-01") + pd.to_timedelta(rng.integers(0, 366, n), unit="D")).strftime(
                "%Y-%m-%d"
            ),
            "region": rng.choice(REGIONS, n, p=[0.25, 0.2, 0.2, 0.2, 0.15]),
            "product": product,
            "quantity": quantity,
            "unit_price": unit_price,
            "revenue": np.round(unit_price * quantity, 2),
        }
    )


def sales(n: int, seed: int = 0) -> pd.DataFrame:
    """Orders: id, date (YYYY-MM-DD, 2024), region, product, quantity, unit_price, revenue."""
    return _sales(n, seed).copy()


@lru_cache(maxsize=16)
def _logs(n: int, seed: int) -> pd.DataFrame:
    rng = np.random.default_rng(seed + 1)
    service = rng.choice(SERVICES, n)
    # Each service has its own latency scale, so "which is slowest" has one clear answer.
    scale = {s: 40 + 25 * i for i, s in enumerate(rng.permutation(SERVICES))}
    latency = rng.gamma(2.0, np.array([scale[s] for s in service]) / 2.0).round().astype(int) + 1
    level = rng.choice(LEVELS, n, p=[0.8, 0.15, 0.05])
    status = np.where(level == "ERROR", rng.choice([500, 503], n), rng.choice([200, 200, 200, 404], n))
    start = pd.Timestamp("2024-06-01")
    return pd.DataFrame(
        {
            "timestamp": (start + pd.to_timedelta(np.sort(rng.integers(0, 86_400 * 7, n)), unit="s")).strftime(
                "%Y-%m-%dT%H:%M:%S"
            ),
            "service": service,
            "level": level,
            "status": status.astype(int),
            "latency_ms": latency,
            "user_id": rng.integers(1, max(2, n // 5), n),
        }
    )


def logs(n: int, seed: int = 0) -> pd.DataFrame:
    """Service logs: timestamp, service, level (INFO/WARN/ERROR), status, latency_ms, user_id."""
    return _logs(n, seed).copy()


def customers(n: int, seed: int = 0) -> pd.DataFrame:
    """The customers of a shop with ``n`` orders: n // 10 of them (at least 5), unique names."""
    rng = np.random.default_rng(seed + 2)
    k = max(5, n // 10)
    names = [
        f"{FIRST[i % len(FIRST)]} {LAST[(i // len(FIRST)) % len(LAST)]} {i // (len(FIRST) * len(LAST)) or ''}".strip()
        for i in range(k)
    ]
    return pd.DataFrame(
        {
            "customer_id": np.arange(1, k + 1),
            "name": names,
            "city": rng.choice(["Oslo", "Lima", "Pune", "Kyiv", "Accra"], k),
        }
    )


def orders(n: int, seed: int = 0) -> pd.DataFrame:
    """Orders of the shop database: order_id, customer_id, amount, date."""
    rng = np.random.default_rng(seed + 3)
    k = len(customers(n, seed))
    weights = rng.gamma(1.0, 1.0, k)
    return pd.DataFrame(
        {
            "order_id": np.arange(1, n + 1),
            "customer_id": rng.choice(np.arange(1, k + 1), n, p=weights / weights.sum()),
            "amount": np.round(rng.gamma(2.0, 40.0, n), 2),
            "date": (pd.Timestamp("2024-01-01") + pd.to_timedelta(rng.integers(0, 366, n), unit="D")).strftime(
                "%Y-%m-%d"
            ),
        }
    )


def make_db(n: int, seed: int, path: str | Path) -> Path:
    """Write the shop database (tables customers, orders) to a SQLite file at ``path``."""
    path = Path(path)
    path.unlink(missing_ok=True)
    con = sqlite3.connect(path)
    try:
        customers(n, seed).to_sql("customers", con, index=False)
        orders(n, seed).to_sql("orders", con, index=False)
        con.commit()
    finally:
        con.close()
    return path
