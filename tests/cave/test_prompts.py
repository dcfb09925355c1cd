"""Prompt rendering, code extraction, observation formatting and truncation."""

from __future__ import annotations

import doctest

import pandas as pd
import pytest
from cave.runtimes.base import ExecError, Execution, VariableInfo

from cave import prompts
from cave.prompts import (
    extract_code,
    format_execution,
    guard_code,
    render_system_prompt,
    trim_traceback,
    truncate_middle,
    unclosed_code,
)
from cave.review import held_notes


def test_doctests():
    result = doctest.testmod(prompts)
    assert result.attempted > 10 and result.failed == 0
    result = doctest.testmod(held_notes)
    assert result.attempted >= 2 and result.failed == 0


# -- system prompt -------------------------------------------------------------------------------
def infos() -> list[VariableInfo]:
    return [
        VariableInfo("sales", "pandas.DataFrame", "variable", "60 rows x 6 columns; region: str", "orders", True),
        VariableInfo("lookup", "function", "function", "lookup(key: str) -> int — Find a key.", None, True),
        VariableInfo("Point", "type", "type", "class Point — dataclass fields: x: int, y: int", None, True),
        VariableInfo("total", "int", "variable", "42", None, False),
        VariableInfo("pd", "module", "module", "module pandas 3.1.0", None, False),
        VariableInfo("final_answer", "function", "function", "final_answer(value)", None, True),
    ]


def test_sections_list_functions_types_given_and_created_variables():
    p = render_system_prompt(infos(), instructions="INSTR")
    assert p.startswith("INSTR\n\n## Functions you can call\n- lookup(key: str) -> int — Find a key.")
    assert "## Types you can use\n- Point: type - class Point — dataclass fields: x: int, y: int" in p
    assert "## Variables given to you\n- sales: pandas.DataFrame - 60 rows x 6 columns; region: str\n  orders" in p
    assert "## Variables you created\n- total: int - 42" in p
    assert "## Modules you imported\npd (pandas)" in p
    assert "final_answer" not in p  # described by the instructions, not listed as state


def test_budget_shrinks_previews_before_dropping_names():
    many = [
        VariableInfo(f"v{i}", "list", "variable", "list len 3 of int " + "x" * 200, f"desc {i}", True)
        for i in range(20)
    ]
    full = render_system_prompt(many, instructions="I")
    short = render_system_prompt(many, instructions="I", budget_tokens=prompts.estimate_tokens(full) // 2)
    assert all(f"- v{i}: list" in short for i in range(20))  # every name kept, previews cut
    assert prompts.estimate_tokens(short) <= prompts.estimate_tokens(full) // 2
    tiny = render_system_prompt(many, instructions="I", budget_tokens=60)
    assert prompts.estimate_tokens(tiny) <= 60
    assert "more names not shown" in tiny


def test_extra_sections_follow_the_instructions():
    p = render_system_prompt([], instructions="I", extra_sections=["## Skills\n- a"])
    assert p == "I\n\n## Skills\n- a"


# -- code extraction -----------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("text", "blocks"),
    [
        ("```python\na = 1\n```", ["a = 1"]),
        ("x\n```py\na = 1\n```\ny\n```\nb = 2\n```", ["a = 1", "b = 2"]),
        ("```python\n    indented = 1\n```", ["indented = 1"]),
        ("```bash\nls\n```\n```python\nz = 3\n```", ["z = 3"]),
        ("```python\n\n```", []),
        ("Use `final_answer(x)` inline.", []),
        ("```python\ncut = [1,", ["cut = [1,"]),
        ("```python\na = '```'\n```", ["a = '```'"]),
    ],
)
def test_extract_code(text, blocks):
    assert extract_code(text) == blocks


def test_unclosed_code_only_for_code_fences():
    assert unclosed_code("```bash\nls") is None
    assert unclosed_code("```python\nx = 1\n```\n```python\ny") == "y"


# -- truncation ----------------------------------------------------------------------------------
def test_truncate_middle_keeps_both_ends_and_says_how_much_was_cut():
    text = "\n".join(f"row {i}" for i in range(10_000))
    out = truncate_middle(text, 1000)
    assert out.startswith("row 0\nrow 1\n") and out.endswith("row 9999")
    assert len(out) <= 1000
    dropped = int(out.split("... [")[1].split(" characters")[0])
    kept = len(out) - len(out[out.index("\n... [") : out.index("] ...\n") + 6])
    assert dropped + kept == len(text)


def test_trim_traceback_keeps_the_last_frames():
    tb = "Traceback (most recent call last):\n"
    tb += "".join(f'  File "<cell-1>", line {i}, in f\n    f()\n' for i in range(10))
    tb += "RecursionError: too deep"
    out = trim_traceback(tb, max_frames=3)
    assert out.count('File "<cell-1>"') == 3 and "line 9" in out and "line 0" not in out
    assert "(7 frames omitted)" in out and out.endswith("RecursionError: too deep")


def test_format_execution_parts():
    ex = Execution(stdout="a\n", stderr="warn\n", result="3", error=ExecError("ValueError", "bad", "ValueError: bad"))
    assert format_execution(ex) == "a\n[stderr]\nwarn\nOut: 3\nValueError: bad"
    timed = Execution(timed_out=True, recovery="interrupted")
    assert "TimeoutError" in format_execution(timed)
    crashed = Execution(error=ExecError("DeadKernel", "died"), recovery="crashed")
    assert "restored" in format_execution(crashed)


def test_huge_error_message_is_truncated_not_dropped():
    ex = Execution(error=ExecError("ValueError", "x", "ValueError: " + "y" * 50_000 + " END"))
    out = format_execution(ex, limit=2000)
    assert out.startswith("ValueError: yyy") and out.endswith("END") and len(out) < 1500


def test_error_hints():
    ex = Execution(error=ExecError("AttributeError", "'Series' object has no attribute 'lower'", "AttributeError: ..."))
    assert "Hint: string methods of a Series are under .str" in format_execution(ex)


@pytest.mark.parametrize(
    ("code", "hint"),
    [
        ("np.array([1.0]).abs()", "this is a NumPy array"),
        ("pd.Series(['a']).dt.hour", "the column holds text, not dates"),
        ("LinearRegression().fit([[np.nan], [1.0]], [1.0, 2.0])", "the model's input has missing values"),
        ("LogisticRegression().fit([[1.0], [2.0]], [0.5, 1.5])", "a classifier needs class labels"),
        ("df = pd.DataFrame({'a': [1.0, 2.0, None]})\ndf[(df.a.dropna() > 1).values]", "the boolean mask has a"),
        ("OneHotEncoder(sparse=False)", "sparse_output=False"),
        ("r = pd.DataFrame({'p': ['a'], 'm': ['x']})\nr[r['p'] == 'a' & r['m'] == 'x']", "wrap each comparison"),
        ("r = pd.DataFrame({'n': [1.0, 2.0]})\nr[r.n > 1 | r.n < 3]", "wrap each comparison"),  # a traps probe
        ("pearsonr(pd.Series([1, 2, 3], dtype=object), pd.Series([1, 2, 4], dtype=object))", "Python objects"),
        ("LogisticRegression(solver='liblinear').fit([[1.0], [2.0], [3.0]], [0, 1, 2])", "leave solver= out"),
        ("import statistics\nstatistics.stdev(pd.Series([1.0, None, 3.0]))", "statistics functions fail on NaN"),
        ("pd.to_datetime(pd.Series(['2025/02/08', 'Apr 12 2025']))", "format='mixed'"),  # analyst clean_signups
        ("pd.Series([0.5, -0.05], index=['const', 'Age'])[1]", "take a position with s.iloc[1]"),  # DABench 355
        ("pd.Series(['7:13 PM']).astype(int)", "is a time of day, not a number"),  # DABench 326
        ("int('19:05')", "format='%H:%M'"),
        (
            "t = pd.DataFrame({'date': pd.to_datetime(['2025-01-01', '2025-02-01']), 'visits': [1, 2]})\n"
            "t.groupby(t['date'].dt.to_period('M')).sum()",
            "the frame has a date column",
        ),  # a per-month sum over the whole frame
        ("pd.DataFrame({'date': pd.to_datetime(['2025-01-01']), 'v': [1]}).sum()", "pick the column to reduce"),
        (
            "t = pd.DataFrame({'date': pd.to_datetime(['2025-01-01', '2025-02-01']), 'visits': [1, 2]})\n"
            "m = t.groupby(pd.to_datetime(t['date']).dt.to_period('M')).sum()['visits']",
            "Your line, rewritten: m = t.groupby(pd.to_datetime(t['date']).dt.to_period('M'))['visits'].sum()",
        ),  # analyst monthly_visits: the general hint, then the same line five times
        (
            "s = pd.DataFrame({'d': [1, 3], 'p': ['a', 'b']}, index=['x', 'y'])\np = s[s['d'].idxmax()]['p']",
            "your line, rewritten: p = s.loc[s['d'].idxmax()]['p']",
        ),  # analyst product_rise: a row label looked up among the columns, four times
        (
            "t = pd.DataFrame({'date': pd.to_datetime(['2025-01-01', '2025-02-01']), 'visits': [1, 2]})\n"
            "m = t.groupby(t.date.dt.month).sum().visits",
            "Your line, rewritten: m = t.groupby(t.date.dt.month)['visits'].sum()",
        ),
        (
            "from sklearn.preprocessing import PowerTransformer\nPowerTransformer(method='log').fit([[1.0], [2.0]])",
            "a log transform is np.log(x)",
        ),  # DABench 726: yeo-johnson next, mean 0 and std 1 sent
        (
            "import sqlalchemy\ndb = sqlalchemy.create_engine('sqlite://')\n"
            "pd.DataFrame({'date': ['2025-01-05']}).to_sql('orders', db)\n"
            "pd.read_sql('SELECT YEAR(date) AS y, COUNT(*) FROM orders GROUP BY y', db)",
            "SQLite has no YEAR(): use strftime('%Y', date)",
        ),  # analyst sql_orders_per_month_2025: YEAR() three times, then made-up rows
        ("import sqlite3\npd.read_sql('SELECT MONTH(1)', sqlite3.connect(':memory:'))", "strftime('%m', date)"),
    ],
)
def test_the_errors_of_the_libraries_as_installed_get_their_hint(code, hint):
    # the real messages of the installed pandas, NumPy, scipy and scikit-learn: a version that rewords one fails here
    from cave.runtimes.inprocess import InProcessRuntime

    runtime = InProcessRuntime()
    runtime.execute(
        "import numpy as np\nimport pandas as pd\nfrom scipy.stats import pearsonr\n"
        "from sklearn.linear_model import LinearRegression, LogisticRegression\n"
        "from sklearn.preprocessing import OneHotEncoder"
    )
    ex = runtime.execute(code)
    assert ex.error is not None and hint in format_execution(ex).split("\nHint: ", 1)[1]


def test_a_row_label_taken_for_a_column_gets_the_rewrite_alone():
    # a development run: df[s.idxmax()] with a numbered index raised KeyError: 29, and the hint about a Series'
    # labels and positions (s[1] is the label 1) came before the rewrite; the model set the product as the index
    from cave.runtimes.inprocess import InProcessRuntime

    runtime = InProcessRuntime()
    ex = runtime.execute(
        "import pandas as pd\ns = pd.DataFrame({'d': [1, 3], 'p': ['a', 'b']})\np = s[s['d'].idxmax()]['p']"
    )
    assert ex.error is not None and ex.error.message == "1"
    assert format_execution(ex).split("\nHint: ", 1)[1] == "your line, rewritten: p = s.loc[s['d'].idxmax()]['p']"


# -- guards --------------------------------------------------------------------------------------
def test_guard_keeps_line_numbers_and_legitimate_code():
    src = "x = 1\ndef final_answer(v):\n    return v\ny = undefined"
    out, notes = guard_code(src)
    assert out.splitlines()[3] == "y = undefined" and out.splitlines()[1] == ""
    assert len(notes) == 1
    assert guard_code("final_answer(df.describe())", ["df"]) == ("final_answer(df.describe())", [])
    assert guard_code("df = df[df.x > 1]", ["df"]) == ("df = df[df.x > 1]", [])
    assert guard_code("other = pd.DataFrame({'a': [1]})", ["df"])[1] == []


def test_guard_keeps_a_given_database_when_a_line_assigns_its_query_result_to_it():
    # a development run: `db = pd.read_sql("SELECT * FROM customers", db)`, then every read_sql(..., db) failed
    src = 'db = pd.read_sql("SELECT * FROM customers", db)\no = pd.read_sql("SELECT * FROM orders", db)'
    out, notes = guard_code(src, {"db": "sqlalchemy.Engine"})
    assert out.splitlines() == ['customers = pd.read_sql("SELECT * FROM customers", db)', src.splitlines()[1]]
    assert "`db` stays the database" in notes[0]
    out, _ = guard_code("db = pd.read_sql('SELECT 1', db)", {"db": "sqlalchemy.Engine"})
    assert out == "db_result = pd.read_sql('SELECT 1', db)"
    assert guard_code("df = df.dropna()", {"df": "pandas.DataFrame"}) == ("df = df.dropna()", [])


def test_a_long_function_signature_is_never_cut_in_the_prompt():
    """tau2's book_reservation has eleven parameters: a cut signature leaves the model unable to call it."""
    from cave.runtimes.describe import describe_namespace

    def book_reservation(
        user_id: str,
        origin: str,
        destination: str,
        flight_type: str,
        cabin: str,
        flights: list[dict],
        passengers: list[dict],
        payment_methods: list[dict],
        total_baggages: int,
        nonfree_baggages: int,
        insurance: str,
    ) -> str:
        """Book a reservation."""
        return "ok"

    infos = describe_namespace({"book_reservation": book_reservation})
    for budget in (4000, 300):  # whole previews, and the one-line fallback of a tight budget
        prompt = prompts.render_system_prompt(infos, budget_tokens=budget, instructions="Solve it.")
        assert "insurance: str) -> str" in prompt, prompt


@pytest.mark.parametrize(
    "code, says",
    [
        ("from sklearn.metrics import mean_squared_error\nmean_squared_error([1, 2], [1, 3], squared=False)",
         "root_mean_squared_error"),
        ("df.append(df)", "pd.concat"),
        ("list(df.a.iteritems())", ".items()"),
        ("df.applymap(str)", "df.map(func)"),
        ("df.a.mad()", "(s - s.mean()).abs().mean()"),
        ("df.fillna(method='ffill')", ".ffill()"),
        ("df.groupby('a').mean()", "numeric_only=True"),
        ("df.b.mean()", "pd.to_numeric"),
        ("from scipy.stats import binom_test", "binomtest"),
    ],
)  # fmt: skip
def test_removed_apis_get_what_replaced_them(code, says):
    # the errors of the installed pandas / scikit-learn / scipy, not strings copied from them: a change in the
    # libraries' messages shows up here
    pytest.importorskip("sklearn")
    pytest.importorskip("scipy")
    from cave.runtimes.inprocess import InProcessRuntime

    from cave.prompts import format_execution

    rt = InProcessRuntime()
    rt.inject("df", pd.DataFrame({"a": [1, 2], "b": ["x", "y"]}))
    ex = rt.execute(code)
    rt.close()
    assert ex.error is not None, code
    assert says in format_execution(ex), (code, ex.error.message)


def test_every_code_block_a_note_shows_starts_and_ends_on_its_own_line():
    # DABench 418: "confirm with ```python ... ```." mid-line; the 1.5B echoed the note and its fences ran the note's
    # prose as code (SyntaxError twice). A block the model may copy must be one it can copy whole.
    import re

    from cave import prompts
    from cave.review import entities, held_notes, misreadings

    notes = [
        (module.__name__, name, value)
        for module in (prompts, held_notes, entities, misreadings)
        for name, value in vars(module).items()
        if isinstance(value, str) and "```python\n" in value
    ]
    assert len(notes) > 5
    for module, name, text in notes:
        for m in re.finditer(r"```python\n", text):
            assert m.start() == 0 or text[m.start() - 1] == "\n", f"{module}.{name}: a block opens mid-line"
        for m in re.finditer(r"\n```", text):
            after = text[m.end() : m.end() + 1]
            assert after in ("", "\n") or after == "p", f"{module}.{name}: text right after a closing fence"
