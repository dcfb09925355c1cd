"""The held-out tasks: new domains, analysts' phrasings, realistic traps; FROZEN (see ``tests/benchmarks/test_heldout.py``).

A ``HeldoutTask`` is an ``AnalystTask`` (its oracle is computed from the generated data, never stored; its
``solution`` is correct Python for the scripted policy) with three more fields: ``trap`` (the kind of trap the
task holds, or None), ``wrong`` (code for the plausible wrong answers the trap invites: the oracle must reject
each), and ``ordered`` / ``distinct`` (the answer is a sequence whose order matters / which must not repeat).

The developer tuning the agent never reads this file: only the runner's totals. Do not edit it: a new version of
the suite is a new package with a new name.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any

import pandas as pd
from cave.benchmarks.analyst.compare import norm_text
from cave.benchmarks.analyst.tasks import AnalystTask
from cave.benchmarks.heldout import generate as g

TRAPS = (
    "spellings",  # one value in several spellings
    "text_values",  # numbers or dates stored as text
    "duplicates",  # exact duplicate rows to remove
    "entities",  # count entities, not rows
    "per_group",  # one value per group, not per row
    "named_columns",  # the result's columns are named in the task
    "which_value",  # "which X": a value of the X column
    "distinct_list",  # a list of X without repeats
    "order",  # an order asked ("highest first")
    "missing",  # missing values, or a missing marker
    "worst",  # "worst" is the min or the max, depending on the measure
    "period_change",  # a change between periods, per group
)


@dataclass(frozen=True)
class HeldoutTask(AnalystTask):
    trap: str | None = None
    wrong: tuple[str, ...] = ()
    ordered: bool = False
    distinct: bool = False

    @property
    def domain(self) -> str:
        return self.category

    def check(self, answer: Any, seed: int = 0) -> bool:
        if not super().check(answer, seed):
            return False
        if not (self.ordered or self.distinct):
            return True
        ref = self.reference(seed)
        ref_seq = [norm_text(x) for x in (ref.iloc[:, 0] if isinstance(ref, pd.DataFrame) else ref)]
        seq = sequence(answer, ref_seq, ref.columns[0] if isinstance(ref, pd.DataFrame) else None)
        if seq is None:
            return False
        if self.distinct and len(seq) != len(set(seq)):
            return False
        return not self.ordered or seq == ref_seq


def sequence(answer: Any, reference: list[str], column: str | None = None) -> list[str] | None:
    """The names of an answer in the order it gives them: a list, an Index, a Series (its values, or its index
    when the values are numbers), a DataFrame (``column``, or the first column or index holding the names), JSON,
    or prose (the reference's names in the order they first appear, each as often as it appears)."""
    if isinstance(answer, str):
        try:
            parsed = json.loads(answer)
        except ValueError:
            parsed = None
        if isinstance(parsed, (list, dict)):
            return sequence(parsed, reference, column)
        found = [
            (m.start(), r) for r in set(reference) for m in re.finditer(rf"(?<!\w){re.escape(r)}(?!\w)", answer, re.I)
        ]
        return [r for _, r in sorted(found)]
    if isinstance(answer, dict):
        answer = list(answer)
    if isinstance(answer, pd.DataFrame):
        frame = answer.reset_index()
        by_name = {norm_text(c): c for c in frame.columns}
        if column is not None and norm_text(column) in by_name:
            return [norm_text(x) for x in frame[by_name[norm_text(column)]]]
        pool = set(reference)
        for c in frame.columns:
            values = [norm_text(x) for x in frame[c]]
            if values and set(values) <= pool:
                return values
        return None
    if isinstance(answer, pd.Series):
        answer = list(answer.index) if pd.api.types.is_numeric_dtype(answer) else list(answer)
    try:
        return [norm_text(x) for x in list(answer)]
    except TypeError:
        return None


# -- reading the data the way a careful analyst does --------------------------------------------------------------
F = g.frame
_HEAD = "import pandas as pd\n"
_MONEY = "import pandas as pd\n\n\ndef money(s):\n    return pd.to_numeric(s.astype(str).str.replace(r'[^0-9.]', '', regex=True), errors='coerce')\n"


def money(s: pd.Series) -> pd.Series:
    """Amounts stored as text ("$1,234.50", "USD 1,234.5", "1,020.00 €") as numbers."""
    return pd.to_numeric(s.astype(str).str.replace(r"[^0-9.]", "", regex=True), errors="coerce")


def tidy(s: pd.Series) -> pd.Series:
    return s.str.strip().str.title()


def table(s: pd.Series) -> dict[str, float]:
    return {str(k): float(v) for k, v in s.items()}


def month_of(s: pd.Series) -> str:
    """The month (``YYYY-MM``) of the largest value of a Series indexed by dates or periods."""
    return pd.Period(s.idxmax(), freq="M").strftime("%Y-%m")


def _visits_waited(seed: int) -> pd.DataFrame:
    v = F("visits", seed)
    return v[v["wait_min"] >= 0]


def _charges(seed: int) -> pd.DataFrame:
    v = F("visits", seed)
    return v.assign(amount=money(v["charge"]), month=v["visit_date"].str[:7])


def _loans(seed: int) -> pd.DataFrame:
    return F("loans", seed).drop_duplicates()


def _repairs(seed: int) -> pd.DataFrame:
    r = F("repairs", seed)
    return r.assign(amount=money(r["cost"]), year=g.truth("repairs", seed)["_when"].dt.year)


def _kwh(seed: int) -> pd.DataFrame:
    r = F("readings", seed)
    return r.assign(kwh=pd.to_numeric(r["kwh"].str.replace(",", ""), errors="coerce"))


def _bookings(seed: int) -> pd.DataFrame:
    b = F("bookings", seed)
    return b.assign(rate=money(b["rate"]), checkin=g.truth("bookings", seed)["_when"])


def _claims(seed: int) -> pd.DataFrame:
    c = F("claims", seed)
    return c.assign(amount=money(c["amount"]), region=tidy(c["region"])).merge(F("policies", seed), on="policy_id")


def _staff(seed: int) -> pd.DataFrame:
    e = F("employees", seed)
    return e.assign(salary=money(e["salary"]))


def _tickets(seed: int) -> pd.DataFrame:
    t = F("tickets", seed).drop_duplicates()
    return t.assign(hours=(t["closed"] - t["opened"]).dt.total_seconds() / 3600)


def _inspections(seed: int) -> pd.DataFrame:
    i = F("inspections", seed)
    return i.assign(borough=tidy(i["borough"]))


def _price(text: str) -> float:
    text = str(text).replace("$", "").replace(",", "").strip()
    return float(text[:-1]) * 1e6 if text.endswith("M") else float(text)


def _listings(seed: int) -> pd.DataFrame:
    x = F("listings", seed)
    return x.assign(price=x["price"].map(_price))


_PRICE = (
    "def price(t):\n    t = str(t).replace('$', '').replace(',', '').strip()\n"
    "    return float(t[:-1]) * 1e6 if t.endswith('M') else float(t)\n"
)


def _q_change(frame: pd.DataFrame, key: str, when: str, value: str, relative: bool = False) -> pd.Series:
    q = frame.groupby([key, frame[when].dt.quarter])[value].sum().unstack()
    return (q[2] - q[1]) / q[1] if relative else q[2] - q[1]


# -- the tasks ------------------------------------------------------------------------------------------------------
_TASKS = [
    # 1. hospital -----------------------------------------------------------------------------------------------
    HeldoutTask(
        "hosp-01",
        "hospital",
        ("visits",),
        "Which of our clinics handled the most visits this half-year?",
        "name",
        lambda seed: tidy(F("visits", seed)["clinic"]).value_counts().idxmax(),
        "final_answer(visits['clinic'].str.strip().str.title().value_counts().idxmax())",
        candidates=lambda seed: list(g.CLINICS),
        trap="spellings",
        wrong=("final_answer(visits['clinic'].value_counts().idxmax())",),
    ),
    HeldoutTask(
        "hosp-02",
        "hospital",
        ("visits",),
        "How many different patients did Cardiology see in March?",
        "count",
        lambda seed: (
            F("visits", seed)
            .pipe(lambda v: v[(v["department"] == "Cardiology") & (v["visit_date"].str[5:7] == "03")])["patient_id"]
            .nunique()
        ),
        "v = visits[(visits['department'] == 'Cardiology') & visits['visit_date'].str.startswith('2025-03')]\n"
        "final_answer(v['patient_id'].nunique())",
        trap="entities",
        wrong=(
            "final_answer(len(visits[(visits['department'] == 'Cardiology') & "
            "visits['visit_date'].str.startswith('2025-03')]))",
        ),
    ),
    HeldoutTask(
        "hosp-03",
        "hospital",
        ("visits",),
        "Can you pull the mean wait by department (only visits where a wait was recorded)? I need it as a table "
        "with columns department and avg_wait.",
        "frame",
        lambda seed: (
            _visits_waited(seed)
            .groupby("department", as_index=False)["wait_min"]
            .mean()
            .rename(columns={"wait_min": "avg_wait"})
        ),
        "v = visits[visits['wait_min'] >= 0]\n"
        "out = v.groupby('department')['wait_min'].mean().reset_index(name='avg_wait')\nfinal_answer(out)",
        trap="named_columns",
        wrong=("final_answer(visits[visits['wait_min'] >= 0].groupby('department')['wait_min'].mean().reset_index())",),
    ),
    HeldoutTask(
        "hosp-04",
        "hospital",
        ("visits",),
        "What's the typical (mean) wait at Riverside in minutes?",
        "number",
        lambda seed: float(F("visits", seed).query("clinic == 'Riverside' and wait_min >= 0")["wait_min"].mean()),
        "v = visits[(visits['clinic'].str.strip().str.title() == 'Riverside') & (visits['wait_min'] >= 0)]\n"
        "final_answer(round(float(v['wait_min'].mean()), 2))",
        trap="missing",
        wrong=("final_answer(float(visits[visits['clinic'] == 'Riverside']['wait_min'].mean()))",),
    ),
    HeldoutTask(
        "hosp-05",
        "hospital",
        ("visits",),
        "what % of ER visits were billed over $1,000?",
        "share",
        lambda seed: float((_charges(seed).query("department == 'ER'")["amount"] > 1000).mean()),
        _HEAD
        + _MONEY
        + "er = visits[visits['department'] == 'ER']\nfinal_answer(float((money(er['charge']) > 1000).mean()))",
        trap="text_values",
        wrong=(
            _HEAD + "er = visits[visits['department'] == 'ER']\n"
            "final_answer(float((pd.to_numeric(er['charge'].str.replace('$', ''), errors='coerce') > 1000).mean()))",
        ),
    ),
    HeldoutTask(
        "hosp-06",
        "hospital",
        ("visits",),
        "Which month of the year so far did we bill the most?",
        "month",
        lambda seed: _charges(seed).groupby("month")["amount"].sum().idxmax(),
        _HEAD + _MONEY + "m = visits.assign(a=money(visits['charge']), m=visits['visit_date'].str[:7])\n"
        "final_answer(m.groupby('m')['a'].sum().idxmax())",
        trap="text_values",
        wrong=(
            _HEAD + "a = pd.to_numeric(visits['charge'].str.replace('$', ''), errors='coerce')\n"
            "final_answer(a.groupby(visits['visit_date'].str[:7]).sum().idxmax())",
        ),
    ),
    # 2. library ------------------------------------------------------------------------------------------------
    HeldoutTask(
        "lib-01",
        "library",
        ("loans",),
        "How many loans have we recorded this year? (every loan has its own loan_id)",
        "count",
        lambda seed: len(_loans(seed)),
        "final_answer(len(loans.drop_duplicates()))",
        trap="duplicates",
        wrong=("final_answer(len(loans))",),
    ),
    HeldoutTask(
        "lib-02",
        "library",
        ("loans",),
        "How many members borrowed from the Harbor branch?",
        "count",
        lambda seed: _loans(seed).query("branch == 'Harbor'")["member_id"].nunique(),
        "final_answer(loans.loc[loans['branch'] == 'Harbor', 'member_id'].nunique())",
        trap="entities",
        wrong=("final_answer(int((loans['branch'] == 'Harbor').sum()))",),
    ),
    HeldoutTask(
        "lib-03",
        "library",
        ("loans", "members"),
        "Give me a list of the members (by name) who still have a book out.",
        "names",
        lambda seed: sorted(
            set(_loans(seed).query("returned.isna()").merge(F("members", seed), on="member_id")["name"])
        ),
        "out = loans[loans['returned'].isna()].merge(members, on='member_id')\n"
        "final_answer(sorted(out['name'].unique()))",
        candidates=lambda seed: list(F("members", seed)["name"]),
        trap="distinct_list",
        distinct=True,
        wrong=("final_answer(list(loans[loans['returned'].isna()].merge(members, on='member_id')['name']))",),
    ),
    HeldoutTask(
        "lib-04",
        "library",
        ("loans",),
        "Which branch lends out the most children's books?",
        "name",
        lambda seed: _loans(seed).query("genre == 'Children'")["branch"].value_counts().idxmax(),
        "final_answer(loans.drop_duplicates().query(\"genre == 'Children'\")['branch'].value_counts().idxmax())",
        candidates=lambda seed: [*g.BRANCHES, *g.GENRES],
        trap="which_value",
        wrong=("final_answer('Children')",),
    ),
    HeldoutTask(
        "lib-05",
        "library",
        ("loans", "members"),
        "How many of our members haven't borrowed anything yet this year?",
        "count",
        lambda seed: int((~F("members", seed)["member_id"].isin(F("loans", seed)["member_id"])).sum()),
        "final_answer(int((~members['member_id'].isin(loans['member_id'])).sum()))",
    ),
    HeldoutTask(
        "lib-06",
        "library",
        ("loans",),
        "How many loans are still out right now?",
        "count",
        lambda seed: int(_loans(seed)["returned"].isna().sum()),
        "final_answer(int(loans.drop_duplicates()['returned'].isna().sum()))",
        trap="duplicates",
        wrong=("final_answer(int(loans['returned'].isna().sum()))",),
    ),
    # 3. fleet --------------------------------------------------------------------------------------------------
    HeldoutTask(
        "fleet-01",
        "fleet",
        ("repairs",),
        "How much did we spend on repairs in 2025?",
        "number",
        lambda seed: float(_repairs(seed).query("year == 2025")["amount"].sum()),
        _HEAD + _MONEY + "r = repairs[pd.to_datetime(repairs['date'], format='mixed', dayfirst=True).dt.year == 2025]\n"
        "final_answer(round(float(money(r['cost']).sum()), 2))",
        trap="text_values",
        wrong=(
            _HEAD + "r = repairs[pd.to_datetime(repairs['date'], format='mixed', dayfirst=True).dt.year == 2025]\n"
            "final_answer(float(pd.to_numeric(r['cost'].str.replace('$', ''), errors='coerce').sum()))",
        ),
    ),
    HeldoutTask(
        "fleet-02",
        "fleet",
        ("repairs", "vehicles"),
        "Which depot's vehicles cost us the most in repairs overall?",
        "name",
        lambda seed: (
            _repairs(seed).merge(F("vehicles", seed), on="vehicle_id").groupby("depot")["amount"].sum().idxmax()
        ),
        _MONEY + "m = repairs.merge(vehicles, on='vehicle_id').assign(c=lambda d: money(d['cost']))\n"
        "final_answer(m.groupby('depot')['c'].sum().idxmax())",
        candidates=lambda seed: list(g.DEPOTS),
    ),
    HeldoutTask(
        "fleet-03",
        "fleet",
        ("repairs", "vehicles"),
        "How many vehicles in the fleet have never been in the workshop?",
        "count",
        lambda seed: int((~F("vehicles", seed)["vehicle_id"].isin(F("repairs", seed)["vehicle_id"])).sum()),
        "final_answer(int((~vehicles['vehicle_id'].isin(repairs['vehicle_id'])).sum()))",
    ),
    HeldoutTask(
        "fleet-04",
        "fleet",
        ("repairs", "vehicles"),
        "total downtime days by depot",
        "table",
        lambda seed: table(
            F("repairs", seed).merge(F("vehicles", seed), on="vehicle_id").groupby("depot")["downtime_days"].sum()
        ),
        "final_answer(repairs.merge(vehicles, on='vehicle_id').groupby('depot')['downtime_days'].sum())",
    ),
    HeldoutTask(
        "fleet-05",
        "fleet",
        ("repairs",),
        "Which kind of repair has the worst average downtime?",
        "name",
        lambda seed: F("repairs", seed).groupby("kind")["downtime_days"].mean().idxmax(),
        "final_answer(repairs.groupby('kind')['downtime_days'].mean().idxmax())",
        candidates=lambda seed: list(g.REPAIR_TYPES),
        trap="worst",
        wrong=("final_answer(repairs.groupby('kind')['downtime_days'].mean().idxmin())",),
    ),
    HeldoutTask(
        "fleet-06",
        "fleet",
        ("repairs",),
        "Top 5 vehicles by total repair cost, highest first, with columns vehicle_id and total_cost.",
        "frame",
        lambda seed: (
            _repairs(seed)
            .groupby("vehicle_id", as_index=False)["amount"]
            .sum()
            .rename(columns={"amount": "total_cost"})
            .nlargest(5, "total_cost")
        ),
        _MONEY + "t = repairs.assign(c=money(repairs['cost'])).groupby('vehicle_id')['c'].sum()\n"
        "final_answer(t.nlargest(5).reset_index(name='total_cost'))",
        trap="order",
        ordered=True,
        wrong=(
            _MONEY + "t = repairs.assign(c=money(repairs['cost'])).groupby('vehicle_id')['c'].sum()\n"
            "final_answer(t.nlargest(5).sort_values().reset_index(name='total_cost'))",
        ),
    ),
    # 4. school -------------------------------------------------------------------------------------------------
    HeldoutTask(
        "school-01",
        "school",
        ("grades",),
        "How many students scored under 50 in at least one subject?",
        "count",
        lambda seed: F("grades", seed).query("score < 50")["student_id"].nunique(),
        "final_answer(grades.loc[grades['score'] < 50, 'student_id'].nunique())",
        trap="entities",
        wrong=("final_answer(int((grades['score'] < 50).sum()))",),
    ),
    HeldoutTask(
        "school-02",
        "school",
        ("grades",),
        "Which subject are we doing worst in, on average?",
        "name",
        lambda seed: F("grades", seed).groupby("subject")["score"].mean().idxmin(),
        "final_answer(grades.groupby('subject')['score'].mean().idxmin())",
        candidates=lambda seed: list(g.SUBJECTS),
        trap="worst",
        wrong=("final_answer(grades.groupby('subject')['score'].mean().idxmax())",),
    ),
    HeldoutTask(
        "school-03",
        "school",
        ("grades",),
        "Which homeroom improved the most between T1 and T2 (average score)?",
        "name",
        lambda seed: (lambda m: (m["T2"] - m["T1"]).idxmax())(
            F("grades", seed).pivot_table(index="homeroom", columns="term", values="score", aggfunc="mean")
        ),
        "m = grades.pivot_table(index='homeroom', columns='term', values='score', aggfunc='mean')\n"
        "final_answer((m['T2'] - m['T1']).idxmax())",
        candidates=lambda seed: list(g.HOMEROOMS),
        trap="period_change",
        wrong=("final_answer(grades[grades['term'] == 'T2'].groupby('homeroom')['score'].mean().idxmax())",),
    ),
    HeldoutTask(
        "school-04",
        "school",
        ("grades",),
        "What's the average T2 score for each subject?",
        "table",
        lambda seed: table(F("grades", seed).query("term == 'T2'").groupby("subject")["score"].mean()),
        "final_answer(grades[grades['term'] == 'T2'].groupby('subject')['score'].mean())",
        trap="per_group",
        wrong=("final_answer(grades[grades['term'] == 'T2'].groupby('subject')['score'].transform('mean'))",),
    ),
    HeldoutTask(
        "school-05",
        "school",
        ("grades",),
        "I'd like the five strongest students by overall average score, best first — columns student and avg_score.",
        "frame",
        lambda seed: (
            F("grades", seed)
            .groupby("student", as_index=False)["score"]
            .mean()
            .rename(columns={"score": "avg_score"})
            .nlargest(5, "avg_score")
        ),
        "t = grades.groupby('student')['score'].mean().nlargest(5)\nfinal_answer(t.reset_index(name='avg_score'))",
        trap="named_columns",
        ordered=True,
        wrong=("final_answer(grades.groupby('student')['score'].mean().nlargest(5).reset_index())",),
    ),
    HeldoutTask(
        "school-06",
        "school",
        ("grades",),
        "Mean Maths score in T1 — students with no score were absent and count as zero.",
        "number",
        lambda seed: float(F("grades", seed).query("subject == 'Maths' and term == 'T1'")["score"].fillna(0).mean()),
        "m = grades[(grades['subject'] == 'Maths') & (grades['term'] == 'T1')]\n"
        "final_answer(float(m['score'].fillna(0).mean()))",
        trap="missing",
        wrong=(
            "final_answer(float(grades[(grades['subject'] == 'Maths') & (grades['term'] == 'T1')]['score'].mean()))",
        ),
    ),
    # 5. energy -------------------------------------------------------------------------------------------------
    HeldoutTask(
        "energy-01",
        "energy",
        ("readings",),
        "How many kWh did the Lab use over the weeks starting in March?",
        "number",
        lambda seed: float(_kwh(seed).query("site == 'Lab' and week.dt.month == 3")["kwh"].sum()),
        _HEAD + "r = readings[(readings['site'] == 'Lab') & (readings['week'].dt.month == 3)]\n"
        "final_answer(float(pd.to_numeric(r['kwh'].str.replace(',', ''), errors='coerce').sum()))",
        trap="text_values",
        wrong=(
            _HEAD + "r = readings[(readings['site'] == 'Lab') & (readings['week'].dt.month == 3)]\n"
            "final_answer(float(pd.to_numeric(r['kwh'], errors='coerce').sum()))",
        ),
    ),
    HeldoutTask(
        "energy-02",
        "energy",
        ("readings",),
        "Which site's consumption grew the most, in percent, from Q1 to Q2?",
        "name",
        lambda seed: _q_change(_kwh(seed), "site", "week", "kwh", relative=True).idxmax(),
        _HEAD + "r = readings.assign(k=pd.to_numeric(readings['kwh'].str.replace(',', ''), errors='coerce'), "
        "q=readings['week'].dt.quarter)\n"
        "p = r.pivot_table(index='site', columns='q', values='k', aggfunc='sum')\n"
        "final_answer(((p[2] - p[1]) / p[1]).idxmax())",
        candidates=lambda seed: list(g.SITES),
        trap="period_change",
        wrong=(
            _HEAD + "r = readings.assign(k=pd.to_numeric(readings['kwh'].str.replace(',', ''), errors='coerce'))\n"
            "final_answer(r[r['week'].dt.quarter == 2].groupby('site')['k'].sum().idxmax())",
        ),
    ),
    HeldoutTask(
        "energy-03",
        "energy",
        ("readings",),
        "In which month was total consumption across all sites lowest?",
        "month",
        lambda seed: month_of(-_kwh(seed).groupby(_kwh(seed)["week"].dt.to_period("M"))["kwh"].sum()),
        _HEAD + "k = pd.to_numeric(readings['kwh'].str.replace(',', ''), errors='coerce')\n"
        "final_answer(k.groupby(readings['week'].dt.to_period('M')).sum().idxmin())",
        trap="text_values",
        wrong=(
            _HEAD + "k = pd.to_numeric(readings['kwh'], errors='coerce')\n"
            "final_answer(k.groupby(readings['week'].dt.to_period('M')).sum().idxmin())",
        ),
    ),
    HeldoutTask(
        "energy-04",
        "energy",
        ("readings",),
        "What fraction of the weekly readings are missing?",
        "share",
        lambda seed: float(_kwh(seed)["kwh"].isna().mean()),
        "final_answer(float((readings['kwh'].str.strip() == '').mean()))",
        trap="missing",
        wrong=("final_answer(float(readings['kwh'].isna().mean()))",),
    ),
    HeldoutTask(
        "energy-05",
        "energy",
        ("readings",),
        "average weekly kWh for each site",
        "table",
        lambda seed: table(_kwh(seed).groupby("site")["kwh"].mean()),
        _HEAD + "k = pd.to_numeric(readings['kwh'].str.replace(',', ''), errors='coerce')\n"
        "final_answer(k.groupby(readings['site']).mean())",
        trap="text_values",
        wrong=(
            _HEAD + "final_answer(pd.to_numeric(readings['kwh'], errors='coerce').groupby(readings['site']).mean())",
        ),
    ),
    HeldoutTask(
        "energy-06",
        "energy",
        ("readings",),
        "In how many weeks did the Depot use more than 7,000 kWh?",
        "count",
        lambda seed: int((_kwh(seed).query("site == 'Depot'")["kwh"] > 7000).sum()),
        _HEAD + "d = readings[readings['site'] == 'Depot']\n"
        "final_answer(int((pd.to_numeric(d['kwh'].str.replace(',', ''), errors='coerce') > 7000).sum()))",
        trap="text_values",
        wrong=(
            _HEAD + "d = readings[readings['site'] == 'Depot']\n"
            "final_answer(int((pd.to_numeric(d['kwh'], errors='coerce') > 7000).sum()))",
        ),
    ),
    # 6. hotels -------------------------------------------------------------------------------------------------
    HeldoutTask(
        "hotel-01",
        "hotels",
        ("bookings",),
        "Which hotel has the highest cancellation rate?",
        "name",
        lambda seed: (
            F("bookings", seed).assign(c=lambda d: d["status"] == "cancelled").groupby("hotel")["c"].mean().idxmax()
        ),
        "final_answer((bookings['status'] == 'cancelled').groupby(bookings['hotel']).mean().idxmax())",
        candidates=lambda seed: [*g.HOTELS, "cancelled", "confirmed", "no-show"],
        trap="which_value",
        wrong=(
            "final_answer(bookings['status'].value_counts().idxmax())",
            "final_answer(bookings[bookings['status'] == 'cancelled']['hotel'].value_counts().idxmax())",
        ),
    ),
    HeldoutTask(
        "hotel-02",
        "hotels",
        ("bookings",),
        "What's the average nightly rate on confirmed bookings?",
        "number",
        lambda seed: float(_bookings(seed).query("status == 'confirmed'")["rate"].mean()),
        _MONEY
        + "c = bookings[bookings['status'] == 'confirmed']\nfinal_answer(round(float(money(c['rate']).mean()), 2))",
        trap="text_values",
        wrong=(
            _HEAD + "c = bookings[bookings['status'] == 'confirmed']\n"
            "final_answer(float(pd.to_numeric(c['rate'], errors='coerce').mean()))",
        ),
    ),
    HeldoutTask(
        "hotel-03",
        "hotels",
        ("bookings",),
        "Which month has the most confirmed check-ins?",
        "month",
        lambda seed: (
            _bookings(seed).query("status == 'confirmed'")["checkin"].dt.strftime("%Y-%m").value_counts().idxmax()
        ),
        _HEAD + "c = bookings[bookings['status'] == 'confirmed']\n"
        "iso = pd.to_datetime(c['checkin'], format='%Y-%m-%d', errors='coerce')\n"
        "d = iso.fillna(pd.to_datetime(c['checkin'], format='mixed', dayfirst=True))\n"
        "final_answer(d.dt.strftime('%Y-%m').value_counts().idxmax())",
    ),
    HeldoutTask(
        "hotel-04",
        "hotels",
        ("bookings",),
        "How many guests booked with us more than once?",
        "count",
        lambda seed: int((F("bookings", seed)["guest_id"].value_counts() > 1).sum()),
        "final_answer(int((bookings['guest_id'].value_counts() > 1).sum()))",
    ),
    HeldoutTask(
        "hotel-05",
        "hotels",
        ("bookings",),
        "Room revenue by hotel from confirmed stays (nights x nightly rate).",
        "table",
        lambda seed: table(
            _bookings(seed).query("status == 'confirmed'").eval("rev = nights * rate").groupby("hotel")["rev"].sum()
        ),
        _MONEY + "c = bookings[bookings['status'] == 'confirmed']\n"
        "final_answer((c['nights'] * money(c['rate'])).groupby(c['hotel']).sum())",
        trap="text_values",
        wrong=(
            _HEAD + "c = bookings[bookings['status'] == 'confirmed']\n"
            "r = pd.to_numeric(c['rate'], errors='coerce')\n"
            "final_answer((c['nights'] * r).groupby(c['hotel']).sum())",
        ),
    ),
    HeldoutTask(
        "hotel-06",
        "hotels",
        ("bookings",),
        "what share of our bookings come in through agencies?",
        "share",
        lambda seed: float((F("bookings", seed)["channel"] == "agency").mean()),
        "final_answer(float((bookings['channel'] == 'agency').mean()))",
    ),
    # 7. flights ------------------------------------------------------------------------------------------------
    HeldoutTask(
        "flight-01",
        "flights",
        ("flights",),
        "Which carrier has the worst on-time record? A flight is on time when it left less than 15 minutes late; "
        "leave cancelled flights out.",
        "name",
        lambda seed: (
            F("flights", seed)
            .query("not cancelled")
            .assign(ok=lambda d: d["delay_min"] < 15)
            .groupby("carrier")["ok"]
            .mean()
            .idxmin()
        ),
        "f = flights[~flights['cancelled']]\nfinal_answer((f['delay_min'] < 15).groupby(f['carrier']).mean().idxmin())",
        candidates=lambda seed: list(g.CARRIERS),
        trap="worst",
        wrong=(
            "f = flights[~flights['cancelled']]\nfinal_answer((f['delay_min'] < 15).groupby(f['carrier']).mean().idxmax())",
        ),
    ),
    HeldoutTask(
        "flight-02",
        "flights",
        ("flights",),
        "Average departure delay per origin airport?",
        "table",
        lambda seed: table(F("flights", seed).groupby("origin")["delay_min"].mean()),
        "final_answer(flights.groupby('origin')['delay_min'].mean())",
        trap="per_group",
        wrong=("final_answer(flights.groupby('origin')['delay_min'].transform('mean'))",),
    ),
    HeldoutTask(
        "flight-03",
        "flights",
        ("flights",),
        "What percentage of flights got cancelled?",
        "share",
        lambda seed: float(F("flights", seed)["cancelled"].mean()),
        "final_answer(float(flights['cancelled'].mean()))",
    ),
    HeldoutTask(
        "flight-04",
        "flights",
        ("flights",),
        "How many departures were more than an hour late?",
        "count",
        lambda seed: int((F("flights", seed)["delay_min"] > 60).sum()),
        "final_answer(int((flights['delay_min'] > 60).sum()))",
    ),
    HeldoutTask(
        "flight-05",
        "flights",
        ("flights",),
        "Longest BlueJet delay in May, in minutes?",
        "number",
        lambda seed: float(
            F("flights", seed).query("carrier == 'BlueJet' and sched_dep.dt.month == 5")["delay_min"].max()
        ),
        "f = flights[(flights['carrier'] == 'BlueJet') & (flights['sched_dep'].dt.month == 5)]\n"
        "final_answer(float(f['delay_min'].max()))",
    ),
    HeldoutTask(
        "flight-06",
        "flights",
        ("flights",),
        "Per carrier, how many flights and what fraction of them were cancelled? Columns carrier, flights, cancel_rate.",
        "frame",
        lambda seed: (
            F("flights", seed)
            .groupby("carrier", as_index=False)
            .agg(flights=("flight_no", "size"), cancel_rate=("cancelled", "mean"))
        ),
        "final_answer(flights.groupby('carrier').agg(flights=('cancelled', 'size'), "
        "cancel_rate=('cancelled', 'mean')).reset_index())",
        trap="named_columns",
        wrong=("final_answer(flights.groupby('carrier')['cancelled'].agg(['size', 'mean']).reset_index())",),
    ),
    # 8. insurance ----------------------------------------------------------------------------------------------
    HeldoutTask(
        "ins-01",
        "insurance",
        ("claims",),
        "Which region files the most claims?",
        "name",
        lambda seed: tidy(F("claims", seed)["region"]).value_counts().idxmax(),
        "final_answer(claims['region'].str.strip().str.title().value_counts().idxmax())",
        candidates=lambda seed: list(g.REGIONS),
        trap="spellings",
        wrong=("final_answer(claims['region'].value_counts().idxmax())",),
    ),
    HeldoutTask(
        "ins-02",
        "insurance",
        ("claims", "policies"),
        "Total approved claim amount per product line.",
        "table",
        lambda seed: table(_claims(seed).query("status == 'approved'").groupby("product")["amount"].sum()),
        _MONEY + "m = claims[claims['status'] == 'approved'].merge(policies, on='policy_id')\n"
        "final_answer(money(m['amount']).groupby(m['product']).sum())",
        trap="text_values",
        wrong=(
            _HEAD + "m = claims[claims['status'] == 'approved'].merge(policies, on='policy_id')\n"
            "final_answer(pd.to_numeric(m['amount'], errors='coerce').groupby(m['product']).sum())",
        ),
    ),
    HeldoutTask(
        "ins-03",
        "insurance",
        ("claims",),
        "How many policies had at least one claim denied?",
        "count",
        lambda seed: F("claims", seed).query("status == 'denied'")["policy_id"].nunique(),
        "final_answer(claims.loc[claims['status'] == 'denied', 'policy_id'].nunique())",
        trap="entities",
        wrong=("final_answer(int((claims['status'] == 'denied').sum()))",),
    ),
    HeldoutTask(
        "ins-04",
        "insurance",
        ("claims",),
        "Of the claims filed in 2024, what share was denied?",
        "share",
        lambda seed: float((F("claims", seed).query("filed.str[:4] == '2024'")["status"] == "denied").mean()),
        "c = claims[claims['filed'].str.startswith('2024')]\nfinal_answer(float((c['status'] == 'denied').mean()))",
    ),
    HeldoutTask(
        "ins-05",
        "insurance",
        ("claims", "policies"),
        "median home-insurance claim amount?",
        "number",
        lambda seed: float(_claims(seed).query("product == 'home'")["amount"].median()),
        _MONEY + "m = claims.merge(policies, on='policy_id')\n"
        "final_answer(float(money(m.loc[m['product'] == 'home', 'amount']).median()))",
        trap="text_values",
        wrong=(
            _HEAD + "m = claims.merge(policies, on='policy_id')\n"
            "final_answer(float(pd.to_numeric(m.loc[m['product'] == 'home', 'amount'], errors='coerce').median()))",
        ),
    ),
    HeldoutTask(
        "ins-06",
        "insurance",
        ("claims", "policies"),
        "Who are our three biggest claimants by total amount claimed? Largest first.",
        "names",
        lambda seed: list(_claims(seed).groupby("holder")["amount"].sum().nlargest(3).index),
        _MONEY + "m = claims.merge(policies, on='policy_id').assign(a=lambda d: money(d['amount']))\n"
        "final_answer(list(m.groupby('holder')['a'].sum().nlargest(3).index))",
        candidates=lambda seed: list(F("policies", seed)["holder"]),
        trap="order",
        ordered=True,
        wrong=(
            _MONEY + "m = claims.merge(policies, on='policy_id').assign(a=lambda d: money(d['amount']))\n"
            "final_answer(list(m.groupby('holder')['a'].sum().nlargest(3).index[::-1]))",
        ),
    ),
    # 9. HR -----------------------------------------------------------------------------------------------------
    HeldoutTask(
        "hr-01",
        "hr",
        ("employees",),
        "Average salary by department for people still with us, as a table with columns department and avg_salary.",
        "frame",
        lambda seed: (
            _staff(seed)
            .query("status == 'active'")
            .groupby("department", as_index=False)["salary"]
            .mean()
            .rename(columns={"salary": "avg_salary"})
        ),
        _MONEY + "a = employees[employees['status'] == 'active']\n"
        "final_answer(money(a['salary']).groupby(a['department']).mean().reset_index(name='avg_salary'))",
        trap="named_columns",
        wrong=(
            _MONEY + "a = employees[employees['status'] == 'active'].assign(salary=lambda d: money(d['salary']))\n"
            "final_answer(a.groupby('department')['salary'].mean().reset_index())",
        ),
    ),
    HeldoutTask(
        "hr-02",
        "hr",
        ("employees",),
        "how many people did we hire in 2023",
        "count",
        lambda seed: int((F("employees", seed)["hire_date"].dt.year == 2023).sum()),
        "final_answer(int((employees['hire_date'].dt.year == 2023).sum()))",
    ),
    HeldoutTask(
        "hr-03",
        "hr",
        ("employees",),
        "Which department has lost the most people?",
        "name",
        lambda seed: F("employees", seed).query("status == 'left'")["department"].value_counts().idxmax(),
        "final_answer(employees[employees['status'] == 'left']['department'].value_counts().idxmax())",
        candidates=lambda seed: list(g.DEPTS),
    ),
    HeldoutTask(
        "hr-04",
        "hr",
        ("employees",),
        "What's our total annual payroll for active staff?",
        "number",
        lambda seed: float(_staff(seed).query("status == 'active'")["salary"].sum()),
        _MONEY + "final_answer(float(money(employees.loc[employees['status'] == 'active', 'salary']).sum()))",
        trap="text_values",
        wrong=(
            _HEAD + "s = employees.loc[employees['status'] == 'active', 'salary']\n"
            "final_answer(float(pd.to_numeric(s.str.replace('$', ''), errors='coerce').sum()))",
        ),
    ),
    HeldoutTask(
        "hr-05",
        "hr",
        ("employees", "reviews"),
        "Who got a top rating (5) in 2024?",
        "names",
        lambda seed: sorted(
            F("reviews", seed).query("year == 2024 and rating == 5").merge(F("employees", seed))["name"]
        ),
        "r = reviews[(reviews['year'] == 2024) & (reviews['rating'] == 5)]\n"
        "final_answer(list(r.merge(employees, on='emp_id')['name']))",
        candidates=lambda seed: list(F("employees", seed)["name"]),
    ),
    HeldoutTask(
        "hr-06",
        "hr",
        ("reviews",),
        "Among employees reviewed in both 2023 and 2024, what share got a lower rating in 2024?",
        "share",
        lambda seed: float(
            (lambda p: (p[2024] < p[2023]).mean())(
                F("reviews", seed).pivot(index="emp_id", columns="year", values="rating").dropna()
            )
        ),
        "p = reviews.pivot(index='emp_id', columns='year', values='rating').dropna()\n"
        "final_answer(float((p[2024] < p[2023]).mean()))",
        trap="period_change",
        wrong=("final_answer(float((reviews.sort_values(['emp_id', 'year'])['rating'].diff() < 0).mean()))",),
    ),
    # 10. support tickets ---------------------------------------------------------------------------------------
    HeldoutTask(
        "tick-01",
        "support",
        ("tickets",),
        "How many tickets came in during February? Each ticket has one ticket_id.",
        "count",
        lambda seed: int((_tickets(seed)["opened"].dt.month == 2).sum()),
        "t = tickets.drop_duplicates()\nfinal_answer(int((t['opened'].dt.month == 2).sum()))",
        trap="duplicates",
        wrong=("final_answer(int((tickets['opened'].dt.month == 2).sum()))",),
    ),
    HeldoutTask(
        "tick-02",
        "support",
        ("tickets",),
        "Which support agent has the worst median time to close a ticket?",
        "name",
        lambda seed: _tickets(seed).groupby("agent")["hours"].median().idxmax(),
        "t = tickets.drop_duplicates()\n"
        "final_answer((t['closed'] - t['opened']).groupby(t['agent']).median().idxmax())",
        candidates=lambda seed: list(g.AGENTS),
        trap="worst",
        wrong=("final_answer((tickets['closed'] - tickets['opened']).groupby(tickets['agent']).median().idxmin())",),
    ),
    HeldoutTask(
        "tick-03",
        "support",
        ("tickets",),
        "What's the average satisfaction score of the tickets that got rated?",
        "number",
        lambda seed: float(_tickets(seed)["csat"].mean()),
        "final_answer(float(tickets.drop_duplicates()['csat'].mean()))",
        trap="missing",
        wrong=("final_answer(float(tickets['csat'].fillna(0).mean()))",),
    ),
    HeldoutTask(
        "tick-04",
        "support",
        ("tickets",),
        "median hours to close, per priority level",
        "table",
        lambda seed: table(_tickets(seed).groupby("priority")["hours"].median()),
        "t = tickets.drop_duplicates()\n"
        "final_answer(((t['closed'] - t['opened']).dt.total_seconds() / 3600).groupby(t['priority']).median())",
        trap="per_group",
        wrong=(
            "t = tickets.drop_duplicates()\n"
            "final_answer(((t['closed'] - t['opened']).dt.total_seconds() / 3600).groupby(t['priority'])"
            ".transform('median'))",
        ),
    ),
    HeldoutTask(
        "tick-05",
        "support",
        ("tickets",),
        "How many high-priority tickets have we had?",
        "count",
        lambda seed: int((_tickets(seed)["priority"] == "high").sum()),
        "final_answer(int((tickets.drop_duplicates()['priority'] == 'high').sum()))",
        trap="duplicates",
        wrong=("final_answer(int((tickets['priority'] == 'high').sum()))",),
    ),
    HeldoutTask(
        "tick-06",
        "support",
        ("tickets",),
        "How many customers reached us by phone?",
        "count",
        lambda seed: _tickets(seed).query("channel == 'phone'")["customer"].nunique(),
        "final_answer(tickets.loc[tickets['channel'] == 'phone', 'customer'].nunique())",
        trap="entities",
        wrong=("final_answer(len(tickets.drop_duplicates().query(\"channel == 'phone'\")))",),
    ),
    # 11. restaurant inspections --------------------------------------------------------------------------------
    HeldoutTask(
        "insp-01",
        "inspections",
        ("inspections",),
        "How many inspections were done in Brooklyn?",
        "count",
        lambda seed: int((_inspections(seed)["borough"] == "Brooklyn").sum()),
        "final_answer(int((inspections['borough'].str.strip().str.lower() == 'brooklyn').sum()))",
        trap="spellings",
        wrong=("final_answer(int((inspections['borough'] == 'Brooklyn').sum()))",),
    ),
    HeldoutTask(
        "insp-02",
        "inspections",
        ("inspections",),
        "List the restaurants that had 4 or more critical violations in a single inspection.",
        "names",
        lambda seed: sorted(set(F("inspections", seed).query("critical_violations >= 4")["restaurant"])),
        "final_answer(sorted(inspections.loc[inspections['critical_violations'] >= 4, 'restaurant'].unique()))",
        candidates=lambda seed: sorted(set(F("inspections", seed)["restaurant"])),
        trap="distinct_list",
        distinct=True,
        wrong=("final_answer(list(inspections.loc[inspections['critical_violations'] >= 4, 'restaurant']))",),
    ),
    HeldoutTask(
        "insp-03",
        "inspections",
        ("inspections",),
        "Which cuisine has the worst average inspection score?",
        "name",
        lambda seed: F("inspections", seed).groupby("cuisine")["score"].mean().idxmax(),
        "final_answer(inspections.groupby('cuisine')['score'].mean().idxmax())",
        candidates=lambda seed: list(g.CUISINES),
        trap="worst",
        wrong=("final_answer(inspections.groupby('cuisine')['score'].mean().idxmin())",),
    ),
    HeldoutTask(
        "insp-04",
        "inspections",
        ("inspections",),
        "In what month were the most critical violations written up?",
        "month",
        lambda seed: month_of(
            F("inspections", seed).set_index("inspected")["critical_violations"].resample("MS").sum()
        ),
        "final_answer(inspections.set_index('inspected')['critical_violations'].resample('MS').sum().idxmax())",
    ),
    HeldoutTask(
        "insp-05",
        "inspections",
        ("inspections",),
        "Number of different restaurants inspected, by cuisine.",
        "table",
        lambda seed: table(F("inspections", seed).groupby("cuisine")["restaurant"].nunique()),
        "final_answer(inspections.groupby('cuisine')['restaurant'].nunique())",
        trap="entities",
        wrong=("final_answer(inspections['cuisine'].value_counts())",),
    ),
    HeldoutTask(
        "insp-06",
        "inspections",
        ("inspections",),
        "Which borough has the highest average score?",
        "name",
        lambda seed: _inspections(seed).groupby("borough")["score"].mean().idxmax(),
        "b = inspections['borough'].str.strip().str.title()\nfinal_answer(inspections.groupby(b)['score'].mean().idxmax())",
        candidates=lambda seed: list(g.BOROUGHS),
    ),
    # 12. real estate -------------------------------------------------------------------------------------------
    HeldoutTask(
        "re-01",
        "real_estate",
        ("listings",),
        "What was the average asking price of the homes that sold?",
        "number",
        lambda seed: float(_listings(seed).query("status == 'sold'")["price"].mean()),
        _PRICE + "s = listings[listings['status'] == 'sold']\nfinal_answer(float(s['price'].map(price).mean()))",
        trap="text_values",
        wrong=(
            _HEAD + "s = listings[listings['status'] == 'sold']\n"
            "final_answer(float(pd.to_numeric(s['price'].str.replace(r'[$,]', '', regex=True), errors='coerce').mean()))",
        ),
    ),
    HeldoutTask(
        "re-02",
        "real_estate",
        ("listings",),
        "Which neighbourhood is the priciest per square foot?",
        "name",
        lambda seed: (
            _listings(seed)
            .dropna(subset=["sqft"])
            .pipe(lambda d: d.groupby("neighbourhood")["price"].sum() / d.groupby("neighbourhood")["sqft"].sum())
            .idxmax()
        ),
        _PRICE + "d = listings.dropna(subset=['sqft']).assign(p=lambda d: d['price'].map(price))\n"
        "final_answer((d['p'] / d['sqft']).groupby(d['neighbourhood']).mean().idxmax())",
        candidates=lambda seed: list(g.HOODS),
    ),
    HeldoutTask(
        "re-03",
        "real_estate",
        ("listings",),
        "For each neighbourhood: how many listings, and the median days on market of the sold ones. "
        "Columns neighbourhood, listings, median_days please.",
        "frame",
        lambda seed: (
            F("listings", seed)
            .groupby("neighbourhood", as_index=False)
            .agg(listings=("listing_id", "size"))
            .merge(
                F("listings", seed)
                .query("status == 'sold'")
                .groupby("neighbourhood", as_index=False)
                .agg(median_days=("days_on_market", "median"))
            )
        ),
        _HEAD + "n = listings.groupby('neighbourhood').size().rename('listings')\n"
        "d = listings[listings['status'] == 'sold'].groupby('neighbourhood')['days_on_market'].median()"
        ".rename('median_days')\nfinal_answer(pd.concat([n, d], axis=1).reset_index())",
        trap="named_columns",
        wrong=(
            "final_answer(listings.groupby('neighbourhood').agg(n=('listing_id', 'size'), "
            "days=('days_on_market', 'median')).reset_index())",
        ),
    ),
    HeldoutTask(
        "re-04",
        "real_estate",
        ("listings",),
        "How many homes were listed in Q2?",
        "count",
        lambda seed: int((F("listings", seed)["listed"].dt.quarter == 2).sum()),
        "final_answer(int((listings['listed'].dt.quarter == 2).sum()))",
    ),
    HeldoutTask(
        "re-05",
        "real_estate",
        ("listings",),
        "Which month saw the most new listings?",
        "month",
        lambda seed: F("listings", seed)["listed"].dt.strftime("%Y-%m").value_counts().idxmax(),
        "final_answer(listings['listed'].dt.to_period('M').value_counts().idxmax())",
    ),
    HeldoutTask(
        "re-06",
        "real_estate",
        ("listings",),
        "Give me a list of the neighbourhoods with an active 4-bedroom listing.",
        "names",
        lambda seed: sorted(set(F("listings", seed).query("status == 'active' and bedrooms == 4")["neighbourhood"])),
        "a = listings[(listings['status'] == 'active') & (listings['bedrooms'] == 4)]\n"
        "final_answer(sorted(a['neighbourhood'].unique()))",
        candidates=lambda seed: list(g.HOODS),
        trap="distinct_list",
        distinct=True,
        wrong=(
            "final_answer(list(listings[(listings['status'] == 'active') & (listings['bedrooms'] == 4)]"
            "['neighbourhood']))",
        ),
    ),
    # more tasks, across the domains ------------------------------------------------------------------------------
    HeldoutTask(
        "fleet-07",
        "fleet",
        ("vehicles",),
        "What share of our fleet is Volvo?",
        "share",
        lambda seed: float((F("vehicles", seed)["make"] == "Volvo").mean()),
        "final_answer(float((vehicles['make'] == 'Volvo').mean()))",
    ),
    HeldoutTask(
        "fleet-08",
        "fleet",
        ("vehicles",),
        "How many vehicles are based at each depot?",
        "table",
        lambda seed: table(F("vehicles", seed)["depot"].value_counts()),
        "final_answer(vehicles.groupby('depot')['vehicle_id'].count())",
    ),
    HeldoutTask(
        "hosp-07",
        "hospital",
        ("visits",),
        "What proportion of all visits were to Pediatrics?",
        "share",
        lambda seed: float((F("visits", seed)["department"] == "Pediatrics").mean()),
        "final_answer(float((visits['department'] == 'Pediatrics').mean()))",
    ),
    HeldoutTask(
        "flight-07",
        "flights",
        ("flights",),
        "What's the average distance of flights leaving HEL, in km?",
        "number",
        lambda seed: float(F("flights", seed).query("origin == 'HEL'")["distance_km"].mean()),
        "final_answer(float(flights.loc[flights['origin'] == 'HEL', 'distance_km'].mean()))",
    ),
    HeldoutTask(
        "flight-08",
        "flights",
        ("flights",),
        "Which carriers had at least one departure more than an hour late?",
        "names",
        lambda seed: sorted(set(F("flights", seed).query("delay_min > 60")["carrier"])),
        "final_answer(sorted(flights.loc[flights['delay_min'] > 60, 'carrier'].unique()))",
        candidates=lambda seed: list(g.CARRIERS),
    ),
    HeldoutTask(
        "lib-07",
        "library",
        ("members",),
        "Who joined the library in 2019?",
        "names",
        lambda seed: sorted(F("members", seed).query("joined.dt.year == 2019")["name"]),
        "final_answer(list(members.loc[members['joined'].dt.year == 2019, 'name']))",
        candidates=lambda seed: list(F("members", seed)["name"]),
    ),
    HeldoutTask(
        "hr-07",
        "hr",
        ("employees",),
        "Who are the department heads, i.e. the people without a manager?",
        "names",
        lambda seed: sorted(F("employees", seed).pipe(lambda e: e[e["manager_id"].isna()])["name"]),
        "final_answer(list(employees.loc[employees['manager_id'].isna(), 'name']))",
        candidates=lambda seed: list(F("employees", seed)["name"]),
    ),
    HeldoutTask(
        "insp-07",
        "inspections",
        ("inspections",),
        "Which month had the most inspections?",
        "month",
        lambda seed: F("inspections", seed)["inspected"].dt.strftime("%Y-%m").value_counts().idxmax(),
        "final_answer(inspections['inspected'].dt.to_period('M').value_counts().idxmax())",
    ),
    HeldoutTask(
        "tick-07",
        "support",
        ("tickets",),
        "In which month did we open the most tickets?",
        "month",
        lambda seed: _tickets(seed)["opened"].dt.strftime("%Y-%m").value_counts().idxmax(),
        "final_answer(tickets.drop_duplicates()['opened'].dt.to_period('M').value_counts().idxmax())",
        trap="duplicates",
        wrong=("final_answer(tickets['opened'].dt.to_period('M').value_counts().idxmax())",),
    ),
    HeldoutTask(
        "hotel-07",
        "hotels",
        ("bookings",),
        "What share of bookings ended as no-shows?",
        "share",
        lambda seed: float((F("bookings", seed)["status"] == "no-show").mean()),
        "final_answer(float((bookings['status'] == 'no-show').mean()))",
    ),
]

TASKS: dict[str, HeldoutTask] = {t.id: t for t in _TASKS}
