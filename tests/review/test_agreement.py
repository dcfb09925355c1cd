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
