"""The task's contract: what its text says the answer must look like, read once per run by general rules.

``read(text)`` finds named result variables and columns, "per X / for each X / by X" (one row per distinct X),
an order ("highest first"), "top N", "which X" (a value of the column that holds X), "how many X" (a count of
X), the kind of answer (a number, a count, a name, a list, a set, a date, a table per group, a frame, yes/no),
decimals and "distinct". ``problems(contract, answer, tables)`` turns it into checks on the answer: each problem
says what was found and the call that fixes it, and goes back to the model the way a failed task check does.

The rules are deliberately conservative: a problem is reported only where the answer cannot be what the text
asks for (a per-row table for "per clinic", a DataFrame for "how many", a value of another column for "which
hotel", duplicates in "the distinct ..."), never on a guess about the numbers.

>>> c = read("Which hotel had the most cancellations? Give the total cancellations per hotel too.")
>>> c.which, c.per, c.kind
('hotel', 'hotel', 'name')
>>> read("How many distinct patients were admitted in 2024?").count_of
'patients'
>>> read("Return a DataFrame with columns `clinic` and `avg_wait`, highest first.").columns
('clinic', 'avg_wait')
"""

from cave.review.contract.checking import CONTRACT_HOLDS, NOTE_HEAD, note, problems
from cave.review.contract.reading import Contract, read
from cave.review.contract.shapes import column_for

__all__ = ["CONTRACT_HOLDS", "NOTE_HEAD", "Contract", "column_for", "note", "problems", "read"]
