"""Agreement between independent answers, and the majority rule with its early exit."""

from __future__ import annotations

import numpy as np
import pandas as pd

from cave.review.agreement import decide, same


def test_numbers_agree_within_tolerance_and_rounding():
    assert same(np.float64(2.3456), 2.35) and same(1e6, 1e6 + 10) and not same(12, 12.4) and not same(0.5, 0.6)
    assert same("12.5%", 0.125) and not same(float("nan"), 1.0)


def test_tables_agree_whatever_their_column_names_and_row_order():
    a = pd.DataFrame({"clinic": ["n", "s"], "wait": [1.0, 2.0]})
    b = pd.DataFrame({"name": ["s", "n"], "median_wait": [2.0, 1.0]})
    assert same(a, b) and same(a.set_index("clinic")["wait"], {"n": 1.0, "s": 2.0})
    assert not same(a, b.assign(median_wait=[2.0, 1.5]))
    assert same(pd.DataFrame({"x": [3]}), 3)  # a one-cell frame is its value


def test_lists_by_items_sets_by_members():
    assert same(["a", "b"], ("b", "a")) and not same(["a", "b"], ["b", "a"], ordered=True)
    assert same({"a", "b"}, ["b", "a"], ordered=True) and not same(["a", "a"], ["a"])


def test_majority_with_early_exit():
    assert decide([True], 1) == "verified" and decide([False], 1) == "disagreed"
    assert decide([True], 3) is None and decide([False, False], 3) == "disagreed"
    assert decide([True, False, True], 3) == "verified" and decide([True], 2) is None


def test_attempts_without_an_answer_do_not_vote_and_are_run_again_up_to_n_times():
    assert decide([None], 1) is None and decide([None, True], 1) == "verified"
    assert decide([None, None], 1) is None and decide([None, None, None], 1) == "disagreed"
    assert decide([None, False], 1) == "disagreed" and decide([None, None, True], 1) == "verified"
    assert decide([True, None], 3) is None and decide([True, None, True], 3) == "verified"
    # 3 asked for: at most 6 attempts, so 4 without an answer leave too few to reach a majority
    assert decide([None, None, None, True], 3) is None and decide([None, None, None, None, True], 3) is None
    assert decide([None, None, None, None, True, None], 3) is None
    assert decide([None, None, None, None, True, None, None], 3) == "disagreed"


def test_the_same_answer_in_another_form_agrees_where_the_task_says_what_it_is():
    import pandas as pd

    from cave.review.agreement import asks_share

    # a name, and the one-row table / one-item Series / (name, value) pair that carries it
    top = pd.DataFrame({"hotel": ["Harbour Inn"], "occupancy": [0.91]})
    for other in (top, pd.Series({"Harbour Inn": 0.91}), ("Harbour Inn", 0.91), ["harbour inn "]):
        assert same("Harbour Inn", other, kind="name")
        assert not same("Bay Lodge", other, kind="name")
    assert not same("Harbour Inn", top)  # without the task's kind a table is a table
    # a fraction and its percentage, only where the task asks for a share
    assert asks_share("What percentage of visits were no-shows?") and not asks_share("How many visits?")
    assert same(0.2175, 21.75, share=True) and same([21.75, 3.0], [0.2175, 0.03], share=True)
    assert not same(0.2175, 21.75) and not same(0.2175, 2.175, share=True)
    # one month written three ways; another month never
    assert same("2025-03", pd.Timestamp("2025-03-01")) and same("Mar 2025", "2025-03")
    assert not same("2025-03", "2025-04-01") and not same("March 2024", "March 2025")


def test_measures_by_label_agree_with_the_labels_where_a_list_is_asked():
    # "which 3 countries have the most ...": value_counts().head(3) and the three names are one answer
    import numpy as np
    import pandas as pd

    counts = pd.Series([90, 80, 70], index=pd.Index(["US", "China", "India"], name="country"))
    names = ["US", "China", "India"]
    assert same(counts, names, kind="list", ordered=True) and same(names, counts.reset_index(), kind="list")
    assert same(counts, np.array(names), kind="set") and same(counts.to_dict(), names, kind="list")
    assert not same(counts, ["US", "India", "China"], kind="list", ordered=True)
    assert not same(counts, ["US", "China"], kind="list") and not same(counts, names)  # kind unknown: not the same


def test_a_month_agrees_with_its_number_name_and_dates_where_the_task_asks_which_month():
    import pandas as pd

    from cave.review.agreement import asks_period, same

    task = "Which month of 2024 had the most signups?"
    assert asks_period(task) == "month" and asks_period("How many signups per month?") is None
    forms = [
        3,
        "March",
        "Mar",
        pd.Period("2024-03", "M"),
        "2024-03",
        pd.Timestamp("2024-03-01"),
        pd.Series({"2024-03": 41}),
    ]
    for a in forms:
        for b in forms:
            assert same(a, b, period="month"), (a, b)
    assert not same(3, "April", period="month") and not same("2024-03", "2023-03", period="month")
    assert not same(3, "March")  # only where the task asks which month
    # answers that are not months compare as before
    assert (
        same(312, 312.0, period="month")
        and not same(312, 313, period="month")
        and not same("marketing", "March", period="month")
    )


def test_an_hour_agrees_with_its_times_where_the_task_asks_which_hour():
    from cave.review.agreement import asks_period, same

    assert asks_period("What hour of the day gets the most logins?") == "hour"
    for a, b in [(9, "09:00"), (21, "9 PM"), (0, "12 am"), ("9:00:00", 9.0)]:
        assert same(a, b, period="hour") and not same(a, b)
    assert not same(9, "10:00", period="hour") and not same(9, "09:30", period="hour")


def test_a_year_agrees_with_its_period_and_a_yearly_label_where_the_task_asks_which_year():
    import pandas as pd

    from cave.review.agreement import asks_period, same

    assert asks_period("Which year saw the most launches?") == "year"
    for b in (pd.Period("2024", "Y"), pd.Timestamp("2024-12-31"), "2024-01-01"):
        assert same(2024, b, period="year")
    assert not same(2024, "2024-03-05", period="year") and not same(2024, 2023, period="year")
