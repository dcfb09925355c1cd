"""`success` means verified: the task's checks, or its contract and agreement between independent attempts."""

from __future__ import annotations

import pandas as pd
import pytest

from cave import Agent, Scripted

VISITS = pd.DataFrame({"clinic": ["a", "a", "b"], "wait": [1.0, 3.0, 5.0]})
RIGHT = "```python\nfinal_answer(visits.groupby('clinic')['wait'].median())\n```"
PER_ROW = "```python\nfinal_answer(visits.assign(m=visits.groupby('clinic')['wait'].transform('median')))\n```"
WRONG = "```python\nfinal_answer(visits.groupby('clinic')['wait'].max())\n```"


def _agent(replies, **kwargs) -> Agent:
    agent = Agent(model=Scripted(replies, repeat_last=True), runtime="inprocess", **kwargs)
    agent.runtime.inject("visits", VISITS.copy(), description="one row per visit")
    return agent


def test_an_answer_that_independent_attempts_agree_with_is_a_success():
    result = _agent([RIGHT, RIGHT]).run("What is the median wait per clinic?")
    assert result.status == "success" and result.answer.to_dict() == {"a": 2.0, "b": 5.0}
    meta = result.trajectory.meta["verify"]
    assert meta["status_before"] == "success" and meta["agreed"] == 1 and meta["attempts"][0]["agrees"]


def test_an_answer_an_attempt_disagrees_with_is_unverified_with_the_reason():
    result = _agent([RIGHT, WRONG]).run("What is the median wait per clinic?")
    assert result.status == "unverified" and result.ok and result.answer.to_dict() == {"a": 2.0, "b": 5.0}
    assert "1 of 1 independent attempts disagreed" in result.trajectory.meta["unverified"]
    assert "5.0" in result.trajectory.meta["verify"]["attempts"][0]["answer"]  # what the attempt answered (b's max)


def test_majority_of_three_with_early_exit():
    result = _agent([RIGHT, WRONG, RIGHT, RIGHT], verify=3).run("What is the median wait per clinic?")
    assert result.status == "success" and len(result.trajectory.meta["verify"]["attempts"]) == 3
    early = _agent([RIGHT, WRONG, WRONG, RIGHT], verify=3).run("What is the median wait per clinic?")
    assert early.status == "unverified" and len(early.trajectory.meta["verify"]["attempts"]) == 2


def test_verification_off_leaves_every_answer_without_checks_unverified():
    result = _agent([RIGHT], verify=0).run("What is the median wait per clinic?")
    assert result.status == "unverified" and "verification is off" in result.trajectory.meta["unverified"]


def test_the_tasks_own_checks_verify_without_attempts():
    checks = {"answer": {"type": "Series", "rows": 2}}
    result = _agent([RIGHT], checks=checks).run("What is the median wait per clinic?")
    assert result.status == "success" and "verify" not in result.trajectory.meta


def test_a_per_row_series_comes_back_with_the_line_that_aggregates_it_by_the_tasks_group():
    # a dev probe: each booking's nights x rate sent for "revenue per hotel"; the 1.5B could not build the groupby
    per_row = "```python\nfinal_answer(visits['wait'] * 2)\n```"
    line = "_final_answer.groupby(visits.loc[_final_answer.index, 'clinic']).median()"
    attempt = "```python\nfinal_answer((visits['wait'] * 2).groupby(visits['clinic']).median())\n```"
    result = _agent([per_row, f"```python\nfinal_answer({line})\n```", attempt]).run(
        "What is the median wait per clinic?"
    )
    first = result.trajectory.steps[0].observation
    assert f"e.g. final_answer({line})" in first
    assert result.status == "success" and result.answer.to_dict() == {"a": 4.0, "b": 10.0}


def test_the_contract_holds_a_per_row_answer_and_the_fix_is_verified():
    result = _agent([PER_ROW, RIGHT, RIGHT]).run("What is the median wait per clinic?")
    assert result.status == "success" and result.trajectory.meta["contract_holds"] == 1
    assert "one row per clinic" in result.trajectory.steps[0].observation


def test_an_answer_that_keeps_breaking_the_contract_is_unverified():
    result = _agent([PER_ROW] * 3).run("What is the median wait per clinic?")
    assert result.status == "unverified" and "contract" in result.trajectory.meta["unverified"]


def test_a_given_databases_tables_are_profiled_and_the_answer_is_reviewed_against_them(tmp_path):
    # a development task: "Which city has the most customers?" over a SQLite database, answered final_answer(3)
    import sqlalchemy

    engine = sqlalchemy.create_engine(f"sqlite:///{tmp_path / 'shop.db'}")
    pd.DataFrame({"name": list("abcde"), "city": ["Oslo", "Oslo", "Lima", "Oslo", "Lima"]}).to_sql("customers", engine)
    count = "```python\nfinal_answer(3)\n```"
    city = "```python\nimport pandas as pd\nc = pd.read_sql('SELECT city FROM customers', db)\nfinal_answer(c.city.value_counts().idxmax())\n```"
    agent = Agent(model=Scripted([count, city, city], repeat_last=True), runtime="inprocess")
    agent.runtime.inject("db", engine, description="the shop's database")
    agent.start()
    import asyncio

    prompt = asyncio.run(agent.system_prompt())
    assert "table customers: 5 rows x 3 columns" in prompt and "'Oslo' (3 rows)" in prompt
    result = agent.run("Which city has the most customers?")
    # the form check reads the database's tables too: it names the column that holds the cities
    assert (
        "the column 'city' of the table customers in `db` holds each city as text"
        in result.trajectory.steps[0].observation
    )
    assert result.status == "success" and result.answer == "Oslo"
    engine.dispose()


def test_a_one_row_table_for_which_x_is_held_with_the_line_that_takes_the_x():
    # a development run: "Which city has the most customers?" answered with the city and its count, one row
    row = "```python\nc = visits.groupby('clinic').size().reset_index(name='n')\nfinal_answer(c.nlargest(1, 'n'))\n```"
    take = "```python\nfinal_answer(_final_answer['clinic'].iloc[0])\n```"
    result = _agent([row, take, "```python\nfinal_answer('a')\n```"]).run("Which clinic has the most visits?")
    assert "final_answer(_final_answer['clinic'].iloc[0])" in result.trajectory.steps[0].observation
    assert result.status == "success" and result.answer == "a"


def test_ids_from_a_given_database_where_the_task_asks_who_get_the_query_that_adds_the_names(tmp_path):
    # a development run: "Who were our top 3 customers ..." answered from SQL with customer_id and the total, a
    # success on the task's row check; the form check knew only given DataFrames
    import sqlalchemy

    engine = sqlalchemy.create_engine(f"sqlite:///{tmp_path / 'shop.db'}")
    pd.DataFrame({"customer_id": [1, 2, 3], "name": ["Ada", "Gus", "Kai"]}).to_sql("customers", engine, index=False)
    pd.DataFrame({"customer_id": [1, 2, 2, 3], "amount": [5.0, 9.0, 4.0, 1.0]}).to_sql("orders", engine, index=False)
    total = "SELECT customer_id, SUM(amount) AS total FROM orders GROUP BY customer_id ORDER BY total DESC LIMIT 2"
    ids = f'```python\nimport pandas as pd\ntop = pd.read_sql("{total}", db)\nfinal_answer(top)\n```'
    named = (
        "```python\nnames = pd.read_sql('SELECT customer_id, name FROM customers', db)\n"
        "final_answer(top.merge(names, on='customer_id')['name'].tolist())\n```"
    )
    agent = Agent(model=Scripted([ids, named]), runtime="inprocess", checks={"answer": {"rows": 2}}, verify=0)
    agent.runtime.inject("db", engine, description="the shop's database")
    result = agent.run("Who were our top 2 customers by total spend?")
    note = result.trajectory.steps[0].observation
    assert "as 'customer_id' values (2, 1)" in note and "the table customers of `db` has their 'name'" in note
    assert 'pd.read_sql("SELECT customer_id, name FROM customers", db)' in note
    assert result.status == "success" and result.answer == ["Gus", "Ada"]
    engine.dispose()


def test_attempts_start_from_the_given_inputs_not_what_the_run_changed():
    mutate = "```python\nvisits.drop(index=[0, 1], inplace=True)\nfinal_answer(len(visits))\n```"
    count = "```python\nfinal_answer(len(visits))\n```"
    result = _agent([mutate, count]).run("How many visits are there?")
    assert result.answer == 1 and result.status == "unverified"  # the attempt counted the 3 visits it was given


def test_a_prose_reply_is_never_a_success():
    result = _agent(["The median wait is 2 for a and 5 for b."], insist_on_code=False).run("Median wait per clinic?")
    assert result.status == "no_code"


def test_verify_must_be_a_count():
    with pytest.raises(ValueError, match="verify must be"):
        Agent(model=Scripted([]), runtime="inprocess", verify=-1)


FAILS = "```python\nraise RuntimeError('the attempt fails')\n```"
GIVES_UP = "I could not compute it."  # the closing call after the attempt's last step


def test_an_attempt_that_reaches_no_answer_does_not_vote_and_is_run_again():
    result = _agent([RIGHT, FAILS, GIVES_UP, RIGHT], max_steps=1).run("What is the median wait per clinic?")
    assert result.status == "success"
    attempts = result.trajectory.meta["verify"]["attempts"]
    assert [a["agrees"] for a in attempts] == [None, True] and attempts[0]["status"] != "success"


def test_attempts_that_never_answer_leave_the_answer_unverified_with_that_reason():
    result = _agent([RIGHT, FAILS, GIVES_UP, FAILS, GIVES_UP, FAILS, GIVES_UP, RIGHT], max_steps=1).run(
        "What is the median wait per clinic?"
    )
    assert result.status == "unverified" and len(result.trajectory.meta["verify"]["attempts"]) == 3
    assert (
        "no independent attempt reached an answer the review accepted (3 tried)" in result.trajectory.meta["unverified"]
    )


def test_an_attempt_whose_answer_the_review_did_not_accept_cannot_outvote_an_accepted_one():
    # the attempt keeps a per-row answer through the contract's holds: it does not vote, another attempt is run
    script = [RIGHT, PER_ROW, PER_ROW, PER_ROW, WRONG]
    result = _agent(script).run("What is the median wait per clinic?")
    attempts = result.trajectory.meta["verify"]["attempts"]
    assert [a["agrees"] for a in attempts] == [None, False] and result.status == "unverified"
    assert "one row per clinic" in attempts[0]["unaccepted"][0] and "unaccepted" not in attempts[1]
    assert result.trajectory.meta["unverified"] == (
        "1 of 1 independent attempts disagreed with it (1 more reached no answer the review accepted)"
    )
    agreed = _agent([RIGHT, PER_ROW, PER_ROW, PER_ROW, RIGHT]).run("What is the median wait per clinic?")
    assert agreed.status == "success" and [a["agrees"] for a in agreed.trajectory.meta["verify"]["attempts"]] == [
        None,
        True,
    ]


def test_a_prose_answer_about_the_given_data_is_sent_back_once_to_be_passed_to_final_answer():
    look = "```python\nprint(visits.groupby('clinic')['wait'].median())\n```"
    result = _agent([look, "The median wait is 2 for a and 5 for b.", RIGHT, RIGHT]).run(
        "What is the median wait per clinic?"
    )
    assert result.status == "success" and result.answer.to_dict() == {"a": 2.0, "b": 5.0}
    assert "cannot be checked" in result.trajectory.steps[1].observation
    again = _agent([look, "It is 2 and 5.", "Still: 2 for a, 5 for b."]).run("What is the median wait per clinic?")
    assert again.status == "no_code" and again.answer == "Still: 2 for a, 5 for b."  # asked once, then it stands


def test_prose_after_a_per_day_result_gets_the_call_and_then_the_line_that_makes_it_per_month():
    # analyst revenue_per_month_2025: a per-day sum printed, a prose summary, then the given table typed in by hand
    orders = pd.DataFrame(
        {"date": ["2025-01-05", "2025-01-05", "2025-01-20", "2025-02-03"], "amount": [10.0, 5.0, 1.0, 7.0]}
    )
    daily = "```python\nrevenue_per_month = orders.groupby('date')['amount'].sum()\nprint(revenue_per_month)\n```"
    prose = "The revenue per month is stored in revenue_per_month."
    monthly = "_final_answer.groupby(pd.to_datetime(_final_answer.index).to_period('M').astype(str)).sum()"
    replies = [daily, prose, "```python\nfinal_answer(revenue_per_month)\n```", f"```python\nimport pandas as pd; final_answer({monthly})\n```",
               "```python\nfinal_answer(orders.groupby(orders['date'].str[:7])['amount'].sum())\n```"]  # fmt: skip
    agent = Agent(model=Scripted(replies, repeat_last=True), runtime="inprocess")
    agent.runtime.inject("orders", orders)
    result = agent.run("revenue per month in 2025")
    steps = result.trajectory.steps
    assert "Your last code left `revenue_per_month`" in steps[1].observation
    assert "final_answer(revenue_per_month)" in steps[1].observation
    assert "Not accepted yet" in steps[2].observation and ".dt.to_period('M')" in steps[2].observation  # per month
    assert result.status == "success" and result.answer.to_dict() == {"2025-01": 16.0, "2025-02": 7.0}


def test_which_clinics_answered_with_waits_by_clinic_comes_back_for_the_names_and_an_attempt_agrees():
    # the Series of waits by clinic: the names as a list, by the call the note gives; the attempt's Series agrees
    by_clinic = "```python\nfinal_answer(visits.groupby('clinic')['wait'].mean().nlargest(2))\n```"
    names = "```python\nfinal_answer(_final_answer.index.tolist())\n```"
    result = _agent([by_clinic, names, by_clinic]).run("Which 2 clinics have the longest average wait?")
    assert "final_answer(_final_answer.index.tolist())" in result.trajectory.steps[0].observation
    assert result.status == "success" and result.answer == ["b", "a"]


COUNT_ONCE = "```python\nc = visits['clinic'].value_counts()\nfinal_answer(sorted(c[c > 1].index))\n```"


def _kept_then(attempt: str, monkeypatch) -> Agent:
    """An agent whose run keeps an answer the review holds ('at least 2 visits' and no code uses 2), and whose
    independent attempts reply ``attempt``."""
    attempts = []
    original = Agent._attempt

    async def counted(self, task, i):
        attempts.append(i)
        return await original(self, task, i)

    monkeypatch.setattr(Agent, "_attempt", counted)
    return _agent(lambda messages: attempt if attempts else COUNT_ONCE)


def test_a_held_answer_the_run_kept_is_verified_by_agreement_not_failed_by_the_hold(monkeypatch):
    # a hold is the review's suspicion, not a check the task declared: the attempts decide
    same = "```python\nn = visits['clinic'].value_counts()\nfinal_answer(sorted(n[n >= 2].index))\n```"
    result = _kept_then(same, monkeypatch).run("Which clinics have at least 2 visits?")
    t = result.trajectory
    assert result.status == "success" and result.answer == ["a"] and t.error is None
    assert t.meta["verify"]["status_before"] == "failed_checks" and t.meta["verify"]["agreed"] == 1
    assert t.meta["kept"] == ["the answer still comes from code that does not apply 'at least 2 visits'"]
    assert "failed_checks" not in t.meta


def test_a_held_answer_the_run_kept_and_an_attempt_disagrees_with_is_unverified_naming_both(monkeypatch):
    other = "```python\nfinal_answer(sorted(visits['clinic'].unique()))\n```"
    result = _kept_then(other, monkeypatch).run("Which clinics have at least 2 visits?")
    why = result.trajectory.meta["unverified"]
    assert result.status == "unverified" and result.answer == ["a"]
    assert why.startswith("it kept what it was held for (the answer still comes from code that does not apply")
    assert why.endswith("1 of 1 independent attempts disagreed with it")


def test_without_verification_by_the_agent_a_kept_answer_still_fails():
    # a team's role (verify=None): the caller verifies, the hold's verdict stands
    result = _agent([COUNT_ONCE], verify=None).run("Which clinics have at least 2 visits?")
    assert result.status == "failed_checks" and "does not apply 'at least 2 visits'" in result.trajectory.error


SPELLED = pd.DataFrame({"clinic": ["a", "A", "a ", "b"], "wait": [1.0, 3.0, 2.0, 5.0]})
SPLIT = "```python\nfinal_answer(visits.groupby('clinic')['wait'].median().to_dict())\n```"
LOOK = "```python\nprint(visits['wait'].describe())\n```"


def test_a_held_answer_left_standing_at_max_steps_is_read_against_the_contract_before_any_attempt():
    # a dev probe: groups split over one clinic's spellings, held, left standing at max_steps, and confirmed by an
    # attempt that split them the same way; the split is a fact of the data, so no attempt is asked
    agent = Agent(model=Scripted([SPLIT, LOOK, GIVES_UP, SPLIT], repeat_last=True), runtime="inprocess", max_steps=2)
    agent.runtime.inject("visits", SPELLED.copy(), description="one row per visit")
    result = agent.run("What is the median wait per clinic?")
    t = result.trajectory
    assert result.status == "unverified" and result.answer == {"A": 3.0, "a": 1.0, "a ": 2.0, "b": 5.0}
    assert "spell one clinic in several ways ('A', 'a', 'a ')" in t.meta["unverified"]
    assert t.meta["verify"]["attempts"] == []


DOGS = pd.DataFrame({"species": ["Dog", " dog", "DOG", "Cat", "Dog "], "fee": [10.0, 20.0, 30.0, 99.0, 40.0]})
EXACT = "```python\nfinal_answer(float(clinic[clinic['species'] == 'Dog']['fee'].mean()))\n```"
CLEAN = "```python\nfinal_answer(float(clinic[clinic['species'].str.strip().str.lower() == 'dog']['fee'].mean()))\n```"
AS_IT_WAS = "```python\nfinal_answer(_final_answer)\n```"


def _dogs(replies) -> Agent:
    agent = Agent(model=Scripted(replies, repeat_last=True), runtime="inprocess")
    agent.runtime.inject("clinic", DOGS.copy(), description="one row per visit")
    return agent


def test_a_selection_by_one_spelling_sent_again_as_it_was_is_unverified_without_attempts():
    # the other spellings are a fact of the data: the model's word that the task means one spelling verifies nothing
    result = _dogs([EXACT, AS_IT_WAS, EXACT, AS_IT_WAS]).run("What is the average fee of visits for dogs?")
    assert result.status == "unverified" and result.answer == 10.0
    assert result.trajectory.meta["unverified"].startswith("it selects rows by one spelling of a value")
    assert result.trajectory.meta["verify"]["attempts"] == []


def test_an_attempt_that_confirmed_one_spelling_cannot_outvote_an_answer_over_every_spelling():
    # a dev probe: the run's answer over every spelling was outvoted by an attempt that confirmed the one spelling
    result = _dogs([CLEAN, EXACT, AS_IT_WAS, CLEAN]).run("What is the average fee of visits for dogs?")
    attempts = result.trajectory.meta["verify"]["attempts"]
    assert result.status == "success" and result.answer == 25.0
    assert [a["agrees"] for a in attempts] == [None, True] and "one spelling" in attempts[0]["unaccepted"][0]
