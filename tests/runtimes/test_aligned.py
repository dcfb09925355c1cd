"""A column assigned from a Series that lines up with no row says so on the cell's stderr (cave.runtimes.aligned)."""

from __future__ import annotations

import doctest

import pandas as pd
from cave.runtimes import aligned

TRAFFIC = pd.DataFrame({"date": pd.date_range("2025-01-01", periods=90), "revenue": 1.0})


def test_doctests():
    assert doctest.testmod(aligned).failed == 0


def test_a_per_month_series_assigned_to_a_per_day_frame_is_said_to_line_up_with_no_row(bare_rt):
    bare_rt.inject("traffic", TRAFFIC)
    ex = bare_rt.execute(
        "traffic['monthly'] = traffic.set_index('date')['revenue'].resample('ME').sum()\n"
        "traffic['double'] = traffic['revenue'] * 2\n"  # the frame's own rows: nothing to say
        "traffic['flag'] = 1\n"
        "traffic['monthly'].isna().all()"
    )
    assert ex.error is None and ex.result is not None and "True" in str(ex.result)  # pandas did what it does
    assert "Note (line 1): the Series assigned to 'monthly' lines up with no row: its 3 labels" in ex.stderr
    assert "line 2" not in ex.stderr and "line 3" not in ex.stderr
    assert bare_rt.retrieve("traffic")["double"].eq(2.0).all()  # the values assigned are the code's own
