"""What the model reads when its answer is held (``cave.review.acceptance``): each hold says what was found, why the
answer cannot stand on it, and the one call that confirms it or fixes it.
"""

from __future__ import annotations

__all__ = [
    "COMPUTED_OTHER_NOTE",
    "EMPTY_HELD_NOTE",
    "FORM_FIX",
    "FORM_NOTE",
    "FORM_NO_FIX",
    "LOSS_HELD_NOTE",
    "NAN_HELD_NOTE",
    "NUMBERS_KEPT_FIX",
    "POLARITY_HELD_NOTE",
    "REVIEW_NOTE",
    "SELF_HELD_NOTE",
    "NUMTEXT_HELD_NOTE",
    "TEXT_HELD_NOTE",
    "SPELLING_FIX",
    "EMPTY_DATES_FIX",
    "SPELLING_HELD_NOTE",
    "TIE_HELD_NOTE",
    "TYPED_FIX",
    "TYPED_NOTE",
    "VARIABLES_NOTE",
    "form_note",
    "review_note",
]

TYPED_NOTE = (
    "Not accepted yet: final_answer got numbers typed in ({numbers}) that no output you had seen shows: they were "
    "written before the code ran. Answer with the values the code computed (the output above), e.g. pass the "
    "variables themselves.{fix}"
)
VARIABLES_NOTE = (
    "Not accepted yet: your code computed something else than the answer says: {wrong}. Values typed into "
    "final_answer are guesses; send what the code computed (if the variable is the answer):\n```python\n{call}\n```"
)
COMPUTED_OTHER_NOTE = (
    "Not accepted yet: your code computed something else than the answer says: {wrong}. Values typed into "
    "final_answer are guesses; send what the computed value gives by the task's rule."
)
TYPED_FIX = " Run:\n```python\n{call}\n```"
_LOSS_WHY = (
    "Not accepted yet: this answer was computed after a conversion (or pd.cut's bins) turned values into NaN (the "
    "Note above), so it leaves them out. "
)
_LOSS_CONFIRM = "if they are truly missing, confirm with:\n```python\nfinal_answer(_final_answer)\n```"
LOSS_HELD_NOTE = _LOSS_WHY + "If those values hold data the task needs, recover them and answer again; " + _LOSS_CONFIRM
EPOCH_HELD_NOTE = (
    "Not accepted yet: this answer was computed from Unix times that pd.to_datetime read as nanoseconds (the Note "
    "above), so every moment is in the first second of 1970. Convert them with the unit the Note gives and answer "
    "again."
)
# the code to run comes before the confirmation: a reply that copies the note runs its first block
NUMBERS_KEPT_FIX = (
    _LOSS_WHY
    + "{restored}\nYour code with the number in each value kept (run it):\n```python\n{code}\n```\nOr, "
    + _LOSS_CONFIRM
)
EMPTY_HELD_NOTE = (
    "Not accepted yet: this answer was computed from a selection that matched nothing (the Note above), so it "
    "counts or averages no rows. Look at the values (e.g. print(df[col].unique()[:20])), match what they hold and "
    "answer again; if no row truly matches, confirm with:\n```python\nfinal_answer(_final_answer)\n```"
)
# the code to run comes first: a reply that copies the note runs its first block
EMPTY_DATES_FIX = (
    "Not accepted yet: this answer was computed from a selection that matched nothing (the Note above): the column "
    "holds dates, written other ways than the text it was matched with. Your code with the dates compared as dates "
    "(run it):\n```python\n{code}\n```\nIf no row truly matches, confirm with:\n```python\nfinal_answer(_final_answer)\n```"
)
_SPELLING_WHY = (
    "Not accepted yet: the column this answer was computed from holds one value written several ways (the Note "
    "above: another case, spaces around it), so a selection by one spelling leaves rows out and a grouping splits "
    "one value into parts. "
)
_SPELLING_CONFIRM = (
    "only if the task means the exact spelling, confirm with:\n```python\nfinal_answer(_final_answer)\n```"
)
SPELLING_HELD_NOTE = (
    _SPELLING_WHY
    + "Compare or group the values as one spelling (the Note gives the line), run it and answer again; "
    + _SPELLING_CONFIRM
)
# the code to run comes first: a reply that copies the note runs its first block (a development probe confirmed)
SPELLING_FIX = (
    _SPELLING_WHY
    + "Your code with the values taken as one spelling (run it):\n```python\n{code}\n```\nOr, "
    + _SPELLING_CONFIRM
)
TIE_HELD_NOTE = (
    "Not accepted yet: this answer was picked from a wide tie (the Note above): idxmax/idxmin took the first of "
    "many equal entries, so it says nothing about the task. Group by what the task asks about, look at the "
    "counts, and answer again."
)
NAN_HELD_NOTE = (
    "Not accepted yet: this answer rests on a scipy.stats call that returned nan (the Note above): its input had "
    "missing values, so the number (and any verdict from it, every comparison with nan being False) says nothing. "
    "Drop the missing values first (e.g. shapiro(df[col].dropna()), skew(df[col].dropna())) and answer again."
)
SELF_HELD_NOTE = (
    "Not accepted yet: this answer was picked from correlations that include the variable itself (the Note above), "
    "whose correlation with itself is always 1. Leave it out, pick again and answer again."
)
TEXT_HELD_NOTE = (
    "Not accepted yet: this answer came from .max()/.min() of a text column (the Note above), which is alphabetical "
    "order, not the row with the largest number. If the task asks which row has the largest value of a column, "
    "use df.loc[df[col].idxmax(), name_col] and answer again; if it truly asks for the alphabetically last, "
    "confirm with:\n```python\nfinal_answer(_final_answer)\n```"
)
NUMTEXT_HELD_NOTE = (
    "Not accepted yet: this answer came from ordering numbers written as text (the Note above): as text, '999' "
    "comes after '1,250,000'. Convert the column to numbers as the Note shows, compute the answer again from it "
    "and call final_answer."
)
POLARITY_HELD_NOTE = (
    "Not accepted yet: a value named for the 'not' group was taken from the group labelled 1/True/yes (the Note "
    "above), the opposite of its name. Pick each group by its label (.loc[0] is 'not', .loc[1] is 'yes') and "
    "answer again; if the labels truly mean the reverse here, confirm with:\n```python\nfinal_answer(_final_answer)\n```"
)
# a question ("Does it answer ...?") drew a prose "Yes"/"No" in 13 of 20 reviews on the development set: each cost a step
REVIEW_NOTE = (
    "Before this is accepted, check it against the task.\nThe task: {task}\nYou are about to return: {what}\n"
    "Check the right rows/granularity, names vs. numbers, units, rounding, and each value in the form the task "
    "names (e.g. the words it lists rather than True/False). Reply with one ```python block and no prose: "
    "code that fixes it and calls final_answer with the corrected result, or, if it answers exactly what the task "
    "asks:\n```python\nfinal_answer(_final_answer)\n```"
)

FORM_NOTE = "Not accepted yet: the answer is not in the form the task asks for:\n{problems}\n{fix}"
FORM_FIX = "If the values are otherwise right, run this:\n```python\nfinal_answer({fixed})\n```"
FORM_NO_FIX = "Fix it and call final_answer again."


def form_note(problems: list[str], fixed: str | None) -> str:
    """The note for an answer not in the form the task names, with the call that fixes it when there is one.

    >>> print(form_note(["'m' is 1.234; the task asks for 2 decimal places: 1.23"], "{'m': 1.23}"))
    Not accepted yet: the answer is not in the form the task asks for:
    - 'm' is 1.234; the task asks for 2 decimal places: 1.23
    If the values are otherwise right, run this:
    ```python
    final_answer({'m': 1.23})
    ```
    """
    fix = FORM_FIX.format(fixed=fixed) if fixed is not None else FORM_NO_FIX
    return FORM_NOTE.format(problems="\n".join(f"- {p}" for p in problems), fix=fix)


def review_note(task: str, what: str, limit: int = 1500) -> str:
    """The review message: the task (its head and its end, where the answer format usually is) beside the answer.

    >>> note = review_note("Q" * 2000 + " Answer format: @x[Yes or No]", "dict of 1: 'x': bool False")
    >>> "Answer format: @x[Yes or No]" in note and " … " in note and len(note) < 2000
    True
    """
    task = task.strip()
    if len(task) > limit:
        task = task[: limit * 2 // 3] + " … " + task[-(limit // 3) :]
    return "Review: " + REVIEW_NOTE.format(task=task, what=what)
