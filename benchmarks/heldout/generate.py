"""Seeded data for the held-out suite: twelve domains nobody tuned on, each with the warts of a real export.

Every table is a pure function of the seed (numpy and pandas only, no other module of cave), so a task's oracle
recomputes its answer from the same rows. The messiness is built in on purpose and documented per table:
a value in several spellings, numbers or dates stored as text, exact duplicate rows, missing values, entities
that repeat over rows. This file is part of the frozen suite (see ``tests/benchmarks/test_heldout.py``).
"""

from __future__ import annotations

from collections.abc import Callable
from functools import lru_cache, wraps

import numpy as np
import pandas as pd

FIRST = ["Ana", "Ben", "Chloe", "Dev", "Elif", "Femi", "Greta", "Hugo", "Ines", "Jonas", "Kira", "Luca", "Maya", "Nico"]
LAST = ["Alves", "Brandt", "Castro", "Dunn", "Eriksen", "Fox", "Grant", "Haas", "Ito", "Jovic", "Kane", "Lind"]


def _table(make: Callable[[int], pd.DataFrame]) -> Callable[..., pd.DataFrame]:
    """A table generator, computed once per seed; every caller gets its own copy."""
    cached = lru_cache(maxsize=4)(make)

    @wraps(make)
    def table(seed: int = 0) -> pd.DataFrame:
        return cached(seed).copy()

    return table


def _rng(seed: int, salt: int) -> np.random.Generator:
    return np.random.default_rng([seed, 9000 + salt])


def _days(rng: np.random.Generator, start: str, days: int, n: int) -> pd.DatetimeIndex:
    return pd.DatetimeIndex(pd.Timestamp(start) + pd.to_timedelta(rng.integers(0, days, n), unit="D"))


def _people(rng: np.random.Generator, n: int) -> list[str]:
    picks = rng.permutation(len(FIRST) * len(LAST))[:n]
    return [f"{FIRST[i % len(FIRST)]} {LAST[i // len(FIRST)]}" for i in picks]


def _spell(rng: np.random.Generator, values: list[str], messy: str, share: float) -> list[str]:
    """``values`` with about ``share`` of the ``messy`` ones respelled (padded, upper, lower case)."""
    out = []
    for v in values:
        if v == messy and rng.random() < share:
            v = [f" {v.lower()}", v.upper(), f"{v} ", v.lower()][int(rng.integers(0, 4))]
        out.append(v)
    return out


def _money(rng: np.random.Generator, values: np.ndarray, symbol: str = "$") -> list[str]:
    """Amounts as text the way exports write them: "$1,234.50", "1234.50", " 1,234.50", "USD 1234.5"."""
    styles = [lambda v: f"{symbol}{v:,.2f}", lambda v: f"{v:.2f}", lambda v: f" {v:,.2f}", lambda v: f"USD {v:,.1f}"]
    if symbol != "$":
        styles[3] = lambda v: f"{v:,.2f} {symbol}"
    return [styles[int(rng.integers(0, 4))](float(v)) for v in values]


# -- 1. hospital ----------------------------------------------------------------------------------------------
CLINICS = ["Northside", "Lakeview", "Riverside", "Hillcrest"]
DEPARTMENTS = ["ER", "Cardiology", "Pediatrics", "Orthopedics", "Radiology"]


@_table
def visits(seed: int = 0) -> pd.DataFrame:
    """visit_id, patient_id (patients come back), clinic (Northside in several spellings), department,
    visit_date (ISO text, Jan-Jun 2025), wait_min (-1 where not recorded), charge (text: "$1,234.50", ...)."""
    rng = _rng(seed, 1)
    n = 340
    clinic = list(rng.choice(CLINICS, n, p=[0.34, 0.28, 0.22, 0.16]))
    clinic = _spell(rng, clinic, "Northside", 0.55)
    dept = rng.choice(DEPARTMENTS, n, p=[0.3, 0.2, 0.2, 0.15, 0.15])
    base = {"ER": 55, "Cardiology": 30, "Pediatrics": 25, "Orthopedics": 35, "Radiology": 20}
    wait = np.array([rng.gamma(3.0, base[d] / 3.0) for d in dept]).round().astype(int) + 2
    wait[rng.random(n) < 0.1] = -1
    charge = np.round(rng.gamma(2.2, 380.0, n) + 60, 2)
    frame = pd.DataFrame(
        {
            "patient_id": [f"P{int(i):04d}" for i in rng.integers(1000, 1150, n)],
            "clinic": clinic,
            "department": dept,
            "visit_date": _days(rng, "2025-01-01", 181, n).strftime("%Y-%m-%d"),
            "wait_min": wait,
            "charge": _money(rng, charge),
        }
    ).sort_values("visit_date", kind="stable")
    frame.insert(0, "visit_id", np.arange(5001, 5001 + n))
    return frame.reset_index(drop=True)


# -- 2. library -----------------------------------------------------------------------------------------------
BRANCHES = ["Central", "Eastgate", "Harbor", "Westfield"]
GENRES = ["Fiction", "History", "Science", "Children", "Travel", "Poetry", "Cooking"]


@_table
def members(seed: int = 0) -> pd.DataFrame:
    """member_id, name, home_branch, joined (date)."""
    rng = _rng(seed, 2)
    n = 60
    return pd.DataFrame(
        {
            "member_id": np.arange(201, 201 + n),
            "name": _people(rng, n),
            "home_branch": rng.choice(BRANCHES, n),
            "joined": _days(rng, "2019-01-01", 2000, n),
        }
    )


@_table
def loans(seed: int = 0) -> pd.DataFrame:
    """loan_id, member_id (some members never borrow), branch, genre, loan_date (datetime, 2025),
    returned (datetime, missing while the book is out); 15 rows are exact duplicates (a double export)."""
    rng = _rng(seed, 3)
    n = 260
    active = rng.permutation(np.arange(201, 261))[:48]
    loan_date = _days(rng, "2025-01-02", 175, n)
    days_out = rng.integers(3, 40, n)
    returned = pd.Series(loan_date + pd.to_timedelta(days_out, unit="D"))
    returned[(returned > pd.Timestamp("2025-06-30")) | (rng.random(n) < 0.06)] = pd.NaT
    frame = pd.DataFrame(
        {
            "loan_id": np.arange(1, n + 1),
            "member_id": rng.choice(active, n),
            "branch": rng.choice(BRANCHES, n, p=[0.4, 0.25, 0.2, 0.15]),
            "genre": rng.choice(GENRES, n, p=[0.3, 0.15, 0.15, 0.15, 0.1, 0.05, 0.1]),
            "loan_date": loan_date,
            "returned": returned,
        }
    ).sort_values("loan_date", kind="stable")
    dupes = frame.iloc[rng.choice(n, 15, replace=False)]
    frame = pd.concat([frame, dupes]).sort_values("loan_date", kind="stable")
    return frame.reset_index(drop=True)


# -- 3. fleet maintenance -------------------------------------------------------------------------------------
MAKES = ["Volvo", "Ford", "Iveco", "Scania", "MAN"]
DEPOTS = ["North Yard", "South Yard", "Airport", "Docks"]
REPAIR_TYPES = ["brakes", "tyres", "engine", "electrical", "bodywork", "service"]


@_table
def vehicles(seed: int = 0) -> pd.DataFrame:
    """vehicle_id, make, depot, model_year."""
    rng = _rng(seed, 4)
    n = 45
    return pd.DataFrame(
        {
            "vehicle_id": [f"V-{i:03d}" for i in range(1, n + 1)],
            "make": rng.choice(MAKES, n),
            "depot": rng.choice(DEPOTS, n),
            "model_year": rng.integers(2012, 2024, n),
        }
    )


@_table
def repairs(seed: int = 0) -> pd.DataFrame:
    """repair_id, vehicle_id (a few vehicles never in the shop), date (text in mixed formats, 2024-2025),
    kind, cost (text with "$" and thousands commas), downtime_days."""
    rng = _rng(seed, 5)
    n = 230
    fleet = vehicles(seed)["vehicle_id"].to_numpy()
    used = rng.permutation(fleet)[:39]
    kind = rng.choice(REPAIR_TYPES, n, p=[0.2, 0.2, 0.12, 0.15, 0.13, 0.2])
    scale = {"brakes": 600, "tyres": 900, "engine": 3200, "electrical": 700, "bodywork": 1500, "service": 350}
    cost = np.array([rng.gamma(3.0, scale[k] / 3.0) for k in kind]).round(2) + 40
    dates = _days(rng, "2024-01-01", 731, n)
    fmts = ["%Y-%m-%d", "%d/%m/%Y", "%b %d, %Y"]
    text_dates = [d.strftime(fmts[int(rng.integers(0, 3))]) for d in dates]
    frame = pd.DataFrame(
        {
            "repair_id": np.arange(1, n + 1),
            "vehicle_id": rng.choice(used, n),
            "date": text_dates,
            "kind": kind,
            "cost": _money(rng, cost),
            "downtime_days": rng.integers(0, 9, n),
            "_when": dates,
            "_cost": cost,
        }
    )
    return frame.sort_values("_when", kind="stable").reset_index(drop=True)


# -- 4. school grades -----------------------------------------------------------------------------------------
SUBJECTS = ["Maths", "English", "Biology", "History", "Art"]
HOMEROOMS = ["7A", "7B", "8A", "8B"]


@_table
def grades(seed: int = 0) -> pd.DataFrame:
    """student_id, student, homeroom, subject, term (T1, T2), score (0-100; missing where absent).
    One row per student, subject and term."""
    rng = _rng(seed, 6)
    n = 36
    names = _people(rng, n)
    room = rng.choice(HOMEROOMS, n)
    ability = rng.normal(66, 10, n)
    difficulty = {"Maths": -9, "English": 2, "Biology": -2, "History": 0, "Art": 8}
    room_gain = {r: g for r, g in zip(HOMEROOMS, rng.permutation([1.0, -1.5, 7.5, 0.0]), strict=True)}
    rows = []
    for i in range(n):
        for s in SUBJECTS:
            for t in ("T1", "T2"):
                gain = room_gain[room[i]] if t == "T2" else 0.0
                score = float(np.clip(round(ability[i] + difficulty[s] + gain + rng.normal(0, 8)), 5, 100))
                rows.append((1000 + i, names[i], room[i], s, t, np.nan if rng.random() < 0.04 else score))
    return pd.DataFrame(rows, columns=["student_id", "student", "homeroom", "subject", "term", "score"])


# -- 5. energy meters -----------------------------------------------------------------------------------------
SITES = ["Depot", "Office", "Lab", "Warehouse", "Store"]


@_table
def readings(seed: int = 0) -> pd.DataFrame:
    """meter_id, site, week (datetime: the Monday a week starts, Jan-Jun 2025), kwh (text: "6,234.5"; "" where
    the meter did not report that week)."""
    rng = _rng(seed, 7)
    weeks = pd.date_range("2025-01-06", "2025-06-30", freq="W-MON")
    growth = dict(zip(SITES, rng.permutation([1.0, 0.92, 1.45, 0.97, 1.05]), strict=True))
    base = dict(zip(SITES, [6300, 2900, 9100, 5300, 3800], strict=True))
    frames = []
    for k, site in enumerate(SITES):
        q2 = np.where(weeks.quarter == 2, growth[site], 1.0)
        winter = 1 + 0.12 * np.cos((weeks.day_of_year.to_numpy() - 15) / 365 * 2 * np.pi)
        kwh = np.round(base[site] * q2 * winter * rng.normal(1, 0.06, len(weeks)), 1)
        text = [f"{v:,.1f}" for v in kwh]
        for i in rng.choice(len(weeks), 2, replace=False):
            text[i] = ""
        frames.append(pd.DataFrame({"meter_id": f"M{100 + k}", "site": site, "week": weeks, "kwh": text}))
    return pd.concat(frames).sort_values(["week", "meter_id"]).reset_index(drop=True)


# -- 6. hotel bookings ----------------------------------------------------------------------------------------
HOTELS = ["Alpina", "Bellevue", "Corsica", "Dunmore", "Esplanade"]
CHANNELS = ["direct", "agency", "web"]


@_table
def bookings(seed: int = 0) -> pd.DataFrame:
    """booking_id, guest_id (guests return), hotel, channel, checkin (text: "2025-03-04", "04.03.2025",
    "March 4, 2025"), nights, rate (text in euros: "€120.00", "1,020.00 €", ...), status (confirmed, cancelled,
    no-show)."""
    rng = _rng(seed, 8)
    n = 300
    hotel = rng.choice(HOTELS, n, p=[0.26, 0.22, 0.2, 0.17, 0.15])
    cancel = dict(zip(HOTELS, rng.permutation([0.06, 0.1, 0.12, 0.4, 0.15]), strict=True))
    status = [
        "cancelled" if rng.random() < cancel[h] else ("no-show" if rng.random() < 0.05 else "confirmed") for h in hotel
    ]
    price = dict(zip(HOTELS, [95, 140, 180, 120, 230], strict=True))
    rate = np.array([price[h] * rng.uniform(0.8, 1.3) for h in hotel]).round(2)
    when = _days(rng, "2025-01-01", 300, n - 45).append(_days(rng, "2025-07-01", 31, 45))  # summer peak
    fmts = ["%Y-%m-%d", "%d.%m.%Y", "%B %d, %Y"]
    frame = pd.DataFrame(
        {
            "booking_id": [f"B{7000 + i}" for i in range(n)],
            "guest_id": rng.integers(1, 190, n),
            "hotel": hotel,
            "channel": rng.choice(CHANNELS, n, p=[0.35, 0.25, 0.4]),
            "checkin": [d.strftime(fmts[int(rng.integers(0, 3))]) for d in when],
            "nights": rng.integers(1, 8, n),
            "rate": _money(rng, rate, "€"),
            "status": status,
            "_when": when,
            "_rate": rate,
        }
    )
    return frame


# -- 7. flights -----------------------------------------------------------------------------------------------
CARRIERS = ["Aurora Air", "BlueJet", "Cirrus", "Deltaway"]
AIRPORTS = ["OSL", "CPH", "ARN", "HEL", "KEF"]


@_table
def flights(seed: int = 0) -> pd.DataFrame:
    """flight_no, carrier, origin, dest, sched_dep (datetime, Apr-May 2025), delay_min (missing when
    cancelled), cancelled (bool), distance_km."""
    rng = _rng(seed, 9)
    n = 380
    carrier = rng.choice(CARRIERS, n)
    late = dict(zip(CARRIERS, rng.permutation([8.0, 12.0, 16.0, 31.0]), strict=True))
    origin = rng.choice(AIRPORTS, n)
    dest = np.array([rng.choice([a for a in AIRPORTS if a != o]) for o in origin])
    cancelled = rng.random(n) < 0.05
    delay = np.array([max(-10.0, rng.exponential(late[c]) - 6) for c in carrier]).round()
    km = {a: i for i, a in enumerate(AIRPORTS)}
    stamp = (
        pd.Timestamp("2025-04-01")
        + pd.to_timedelta(rng.integers(0, 61, n), unit="D")
        + pd.to_timedelta(rng.integers(6 * 60, 23 * 60, n), unit="min")
    )
    return (
        pd.DataFrame(
            {
                "flight_no": [f"{c[:2].upper()}{rng.integers(100, 999)}" for c in carrier],
                "carrier": carrier,
                "origin": origin,
                "dest": dest,
                "sched_dep": stamp,
                "delay_min": np.where(cancelled, np.nan, delay),
                "cancelled": cancelled,
                "distance_km": [300 + 170 * abs(km[o] - km[d]) + 40 * km[o] for o, d in zip(origin, dest, strict=True)],
            }
        )
        .sort_values("sched_dep")
        .reset_index(drop=True)
    )


# -- 8. insurance claims --------------------------------------------------------------------------------------
REGIONS = ["Coastal", "Highlands", "Metro", "Valley"]
CLAIM_TYPES = ["auto", "home", "travel", "health"]


@_table
def policies(seed: int = 0) -> pd.DataFrame:
    """policy_id, holder, product (auto, home, travel, health), annual_premium."""
    rng = _rng(seed, 10)
    n = 90
    return pd.DataFrame(
        {
            "policy_id": [f"POL{3000 + i}" for i in range(n)],
            "holder": _people(rng, n),
            "product": rng.choice(CLAIM_TYPES, n),
            "annual_premium": rng.integers(300, 2400, n),
        }
    )


@_table
def claims(seed: int = 0) -> pd.DataFrame:
    """claim_id, policy_id (policies claim more than once), region (Metro in several spellings), filed (ISO
    text, 2024-2025), amount (text with thousands commas), status (approved, denied, pending)."""
    rng = _rng(seed, 11)
    n = 250
    pol = policies(seed)
    idx = rng.choice(len(pol), n, p=np.repeat([3.0, 1.0], [30, 60]) / 150)
    region = _spell(rng, list(rng.choice(REGIONS, n, p=[0.24, 0.2, 0.36, 0.2])), "Metro", 0.6)
    kind = pol["product"].to_numpy()[idx]
    scale = {"auto": 4200, "home": 9000, "travel": 900, "health": 2600}
    amount = np.array([rng.gamma(2.0, scale[k] / 2.0) for k in kind]).round(2) + 50
    return pd.DataFrame(
        {
            "claim_id": np.arange(80001, 80001 + n),
            "policy_id": pol["policy_id"].to_numpy()[idx],
            "region": region,
            "filed": _days(rng, "2024-01-01", 731, n).strftime("%Y-%m-%d"),
            "amount": [f"{v:,.2f}" for v in amount],
            "status": rng.choice(["approved", "denied", "pending"], n, p=[0.6, 0.25, 0.15]),
        }
    ).sort_values("filed", kind="stable", ignore_index=True)


# -- 9. HR ----------------------------------------------------------------------------------------------------
DEPTS = ["Engineering", "Finance", "Marketing", "Operations", "Sales"]


@_table
def employees(seed: int = 0) -> pd.DataFrame:
    """emp_id, name, department, hire_date (datetime), salary (text: "$85,000"), status (active, left),
    manager_id (missing for the heads)."""
    rng = _rng(seed, 12)
    n = 110
    dept = rng.choice(DEPTS, n, p=[0.3, 0.15, 0.15, 0.2, 0.2])
    pay = {"Engineering": 98000, "Finance": 86000, "Marketing": 74000, "Operations": 63000, "Sales": 70000}
    salary = np.array([pay[d] * rng.uniform(0.75, 1.3) for d in dept]).round(-2)
    heads = {d: int(np.flatnonzero(dept == d)[0]) for d in DEPTS}
    leave = dict(zip(DEPTS, rng.permutation([0.1, 0.12, 0.14, 0.16, 0.4]), strict=True))
    manager = [np.nan if i == heads[d] else 100 + heads[d] for i, d in enumerate(dept)]
    return pd.DataFrame(
        {
            "emp_id": np.arange(100, 100 + n),
            "name": _people(rng, n),
            "department": dept,
            "hire_date": _days(rng, "2016-01-01", 3400, n),
            "salary": [f"${v:,.0f}" for v in salary],
            "status": np.where(rng.random(n) < np.array([leave[d] for d in dept]), "left", "active"),
            "manager_id": manager,
        }
    )


@_table
def reviews(seed: int = 0) -> pd.DataFrame:
    """emp_id, year (2023, 2024), rating (1-5): one review per employee and year, for those present."""
    rng = _rng(seed, 13)
    emp = employees(seed)
    rows = []
    for eid, hired in zip(emp["emp_id"], emp["hire_date"], strict=True):
        for year in (2023, 2024):
            if hired.year < year:
                rows.append((eid, year, int(rng.choice([1, 2, 3, 4, 5], p=[0.05, 0.15, 0.4, 0.3, 0.1]))))
    return pd.DataFrame(rows, columns=["emp_id", "year", "rating"])


# -- 10. support tickets --------------------------------------------------------------------------------------
AGENTS = ["Priya", "Tomas", "Wen", "Olga", "Sam"]
PRIORITIES = ["low", "normal", "high", "urgent"]


@_table
def tickets(seed: int = 0) -> pd.DataFrame:
    """ticket_id, customer, agent, priority, channel, opened, closed (datetimes; closed missing while open),
    csat (1-5, missing when the customer did not answer); 12 rows are exact duplicates."""
    rng = _rng(seed, 14)
    n = 280
    agent = rng.choice(AGENTS, n, p=[0.25, 0.2, 0.2, 0.2, 0.15])
    speed = dict(zip(AGENTS, rng.permutation([6.0, 9.0, 14.0, 22.0, 38.0]), strict=True))
    opened = pd.Timestamp("2025-01-01") + pd.to_timedelta(rng.integers(0, 120 * 24 * 60, n), unit="min")
    hours = np.array([rng.gamma(2.0, speed[a] / 2.0) for a in agent]).round(1) + 0.2
    closed = pd.Series(opened + pd.to_timedelta(hours, unit="h"))
    closed[rng.random(n) < 0.07] = pd.NaT
    csat = rng.choice([1, 2, 3, 4, 5], n, p=[0.08, 0.1, 0.2, 0.32, 0.3]).astype(float)
    csat[rng.random(n) < 0.35] = np.nan
    frame = pd.DataFrame(
        {
            "ticket_id": np.arange(40001, 40001 + n),
            "customer": [f"ACME-{int(c):03d}" for c in rng.integers(1, 95, n)],
            "agent": agent,
            "priority": rng.choice(PRIORITIES, n, p=[0.3, 0.4, 0.2, 0.1]),
            "channel": rng.choice(["email", "chat", "phone"], n),
            "opened": opened,
            "closed": closed,
            "csat": csat,
        }
    ).sort_values("opened")
    dupes = frame.iloc[rng.choice(n, 12, replace=False)]
    return pd.concat([frame, dupes]).sort_values("opened", kind="stable").reset_index(drop=True)


# -- 11. restaurant inspections -------------------------------------------------------------------------------
BOROUGHS = ["Brooklyn", "Queens", "Manhattan", "Bronx"]
CUISINES = ["Pizza", "Chinese", "Mexican", "Cafe", "Indian", "Deli", "Thai"]


@_table
def inspections(seed: int = 0) -> pd.DataFrame:
    """inspection_id, restaurant, borough (Brooklyn in several spellings), cuisine, inspected (datetime, 2024),
    score (violation points: lower is better), critical_violations. Restaurants are inspected several times."""
    rng = _rng(seed, 15)
    k = 70
    names = [f"{w} {c}" for w, c in zip(rng.permutation(_WORDS * 2)[:k], rng.choice(CUISINES, k), strict=True)]
    names = list(dict.fromkeys(names))
    k = len(names)
    borough = dict(zip(names, rng.choice(BOROUGHS, k, p=[0.36, 0.26, 0.24, 0.14]), strict=True))
    cuisine = {nm: nm.split()[-1] for nm in names}
    sloppy = CUISINES[int(rng.integers(len(CUISINES)))]
    quality = {
        nm: q + (7.0 if cuisine[nm] == sloppy else 0.0) for nm, q in zip(names, rng.gamma(2.0, 7.0, k), strict=True)
    }
    n = 240
    who = rng.choice(names, n)
    score = np.array([max(0, round(quality[w] + rng.normal(0, 5))) for w in who])
    return (
        pd.DataFrame(
            {
                "restaurant": who,
                "borough": _spell(rng, [borough[w] for w in who], "Brooklyn", 0.5),
                "cuisine": [cuisine[w] for w in who],
                "inspected": _days(rng, "2024-01-01", 366, n),
                "score": score,
                "critical_violations": np.minimum(score // 9, 4) + rng.integers(0, 2, n) * (score > 20),
            }
        )
        .sort_values("inspected", kind="stable")
        .reset_index(drop=True)
        .rename_axis("inspection_id")
        .reset_index()
        .assign(inspection_id=lambda d: d["inspection_id"] + 1)
    )


_WORDS = ["Golden", "Lucky", "Blue", "Corner", "Urban", "Little", "Royal", "Happy", "Green", "Sunny", "Old", "New",
          "Red", "Silver", "Grand", "Crown", "Star", "Twin", "Park", "River", "Bay", "Hill", "Lotus", "Garden",
          "Palace", "Spice", "Fresh", "Family", "Village", "Harbor", "Ocean", "Empire", "Tiny", "Bright", "Maple",
          "Cedar", "Jade"]  # fmt: skip


# -- 12. real-estate listings ---------------------------------------------------------------------------------
HOODS = ["Old Town", "Riverside", "Hilltop", "Docklands", "Parkview", "Uptown"]


@_table
def listings(seed: int = 0) -> pd.DataFrame:
    """listing_id, neighbourhood, bedrooms, sqft (missing for some), price (text: "$450,000", "450000",
    "$1.25M"), listed (datetime, 2025), status (active, sold, withdrawn), days_on_market (missing while active)."""
    rng = _rng(seed, 16)
    n = 210
    hood = rng.choice(HOODS, n, p=[0.2, 0.18, 0.16, 0.16, 0.15, 0.15])
    per_sqft = dict(zip(HOODS, [520, 410, 380, 610, 300, 470], strict=True))
    beds = rng.choice([1, 2, 3, 4, 5], n, p=[0.15, 0.3, 0.3, 0.18, 0.07])
    sqft = np.round(350 + beds * rng.normal(420, 60, n), -1)
    price = np.round(np.array([per_sqft[h] for h in hood]) * sqft * rng.normal(1, 0.08, n), -3)
    price = np.where(price >= 1e6, np.round(price, -4), price)
    text = [f"${p / 1e6:.2f}M" if p >= 1e6 else [f"${p:,.0f}", f"{p:.0f}"][int(rng.integers(0, 2))] for p in price]
    status = rng.choice(["active", "sold", "withdrawn"], n, p=[0.3, 0.6, 0.1])
    dom = np.where(status == "active", np.nan, rng.integers(5, 150, n))
    sqft_shown = np.where(rng.random(n) < 0.08, np.nan, sqft)
    return pd.DataFrame(
        {
            "listing_id": np.arange(1, n + 1),
            "neighbourhood": hood,
            "bedrooms": beds,
            "sqft": sqft_shown,
            "price": text,
            "listed": _days(rng, "2025-01-01", 270, n - 30).append(_days(rng, "2025-05-01", 31, 30)),  # spring
            "status": status,
            "days_on_market": dom,
            "_price": price,
        }
    )


# -- the tables the agent is handed -----------------------------------------------------------------------------
_MAKERS: dict[str, Callable[..., pd.DataFrame]] = {
    "visits": visits,
    "members": members,
    "loans": loans,
    "vehicles": vehicles,
    "repairs": repairs,
    "grades": grades,
    "readings": readings,
    "bookings": bookings,
    "flights": flights,
    "policies": policies,
    "claims": claims,
    "employees": employees,
    "reviews": reviews,
    "tickets": tickets,
    "inspections": inspections,
    "listings": listings,
}

DESCRIPTIONS = {
    "visits": "clinic visits, January to June 2025 (wait_min is -1 where the wait was not recorded)",
    "members": "library members",
    "loans": "library loans in 2025 (returned is empty while the book is still out)",
    "vehicles": "our delivery fleet",
    "repairs": "workshop repairs of the fleet, 2024-2025",
    "grades": "term scores per student and subject (this school year)",
    "readings": "weekly electricity meter readings per site, first half of 2025 (week = the Monday it starts)",
    "bookings": "hotel bookings for 2025 (rate is per night, in euros)",
    "flights": "scheduled flights, April-May 2025 (delay in minutes)",
    "policies": "insurance policies",
    "claims": "insurance claims filed 2024-2025",
    "employees": "staff list from the HR system",
    "reviews": "yearly performance reviews (rating 1-5)",
    "tickets": "support tickets, first four months of 2025",
    "inspections": "restaurant health inspections in 2024 (score = violation points, lower is better)",
    "listings": "home listings in 2025",
}


def frame(name: str, seed: int = 0) -> pd.DataFrame:
    """The table ``name`` as the agent gets it (the generator's private ``_`` columns dropped)."""
    table = _MAKERS[name](seed)
    return table.drop(columns=[c for c in table.columns if c.startswith("_")])


def truth(name: str, seed: int = 0) -> pd.DataFrame:
    """The table ``name`` with the generator's private columns (true dates and amounts behind the text)."""
    return _MAKERS[name](seed)


TABLES = tuple(_MAKERS)
