"""The names a task's text gives its result: the variables to leave it in and the columns it must have.

>>> result_columns("Name the columns region and revenue."), result_names("Store it in a variable called `by_region`.")
(('region', 'revenue'), ('by_region',))
"""

from __future__ import annotations

import re

from cave.review.contract.words import IDENT as _IDENT
from cave.review.contract.words import STOP as _STOP

__all__ = ["result_columns", "result_names"]

_ROLE_NOUNS = r"(?:result|output|answer|table|frame|dataframe|data frame|summary)"
# phrasings whose list of names follows: "with columns a and b", "columns: a, b", "column names a and b",
# "name the columns a and b", "a two-column table: a and b", "whose columns are a and b", "output columns should be"
_COLUMNS_BEFORE = re.compile(
    r"(?:\b(?:with|use|using|has|have|having)\s+(?:the\s+)?column\s+names\b"
    r"|\b(?:with|having|containing|has|have|include|including|showing|into|and|two|three|four)\s+"
    r"(?:(?:the|two|three|four|exactly|only|just)\s+){0,2}(?:output\s+|result\s+)?columns?\b(?:\s+(?:named|called))?"
    r"|\bname\s+(?:the|its|their)\s+columns\b"
    r"|\bcolumns\s+(?:named|called)\b"
    r"|\b(?:two|three|four|five|\d)[- ]columns?\s+" + _ROLE_NOUNS + r"\b(?:\s+(?:with|of))?"
    r"|\b(?:whose|its|their)\s+columns\s+(?:are|should be|must be)\b"
    r"|\b" + _ROLE_NOUNS + r"(?:'s)?\s+columns\s+(?:are|should be|must be)\b"
    r"|(?:^|[.;!?]\s+)(?:output\s+|result\s+)?columns\s*(?=:))"
    r"\s*:?\s*",
    re.I,
)
# what comes right before "has columns" / "with columns" when they describe a given table, not the result: a
# relative clause ("which has columns", "that has columns") or a named table ("the orders table with columns")
_DESCRIBES_INPUT = re.compile(
    r"(?:\b(?:which|that)\s+|\bthe\s+[\w`'\"]+\s+(?:table|frame|dataframe|data\s*frame|dataset|sheet)\s*,?\s*)$", re.I
)
# phrasings whose list comes first ("with `a` and `b` as its columns"), and lists that follow a result being made
# ("return a table with a and b columns", "give me a table (a, b)"): only where the text makes the table, for
# "the orders table (id, amount)" or "the table with price and qty columns" describe an input
_MADE = r"\b(?:as|return|returns|give|gives|produce|build|make|create|output|want|need)\s+(?:me\s+)?(?:a|an|the|one)?\s*(?:new\s+)?"
_LISTS_CUT_OUT = (
    re.compile(r"\bwith\s+(?:the\s+)?([^.;:()?!]{3,120}?)\s+as\s+(?:its\s+|the\s+)?columns\b", re.I),
    re.compile(
        _MADE + r"(?:table|frame|dataframe|data frame|summary)\s+with\s+(?:the\s+)?([^.;:()?!]{3,120}?)\s+columns\b",
        re.I,
    ),
    re.compile(_MADE + r"(?:table|frame|dataframe|data frame)\s*\(([^()]{3,120})\)", re.I),
)


def result_columns(raw: str) -> tuple[str, ...]:
    """Result columns the text names: "with columns `a`, `b`", "a DataFrame with columns region and total",
    "columns: a, b", "a two-column table: a and b", "with `a` and `b` as its columns", "give me a table (a, b)".
    Columns the text names as inputs ("using the columns a and b", "the correlation between columns a and b")
    are not the result's.

    >>> result_columns("Name the columns region and revenue."), result_columns("Give me a table (region, revenue).")
    (('region', 'revenue'), ('region', 'revenue'))
    >>> result_columns("Produce a frame with `region` and `revenue` as its columns.")
    ('region', 'revenue')
    >>> result_columns("Using the columns price and qty, compute the revenue.")
    ()
    >>> result_columns("For the orders table, which has columns id and amount, what is the total?")
    ()
    """
    for m in _COLUMNS_BEFORE.finditer(raw):
        before = re.split(r"[.;!?\n]", raw[: m.start()])[-1]
        if _DESCRIBES_INPUT.search(before[-40:]) and not re.search(_MADE, before, re.I):
            continue  # "the orders table, which has columns id and amount": what is given, not the result
        items = _listed(raw[m.end() :])
        if items:
            return tuple(items)
    for pattern in _LISTS_CUT_OUT:
        for m in pattern.finditer(raw):
            items = _listed(m.group(1), whole=True)
            if items:
                return tuple(items)
    return ()


def _listed(text: str, *, whole: bool = False) -> list[str]:
    """The names listed at the start of ``text``: `a`, `b` and `c`; 'a', "b"; plain words a, b and c. ``whole``:
    the names must be all of ``text`` (a list cut out by its surroundings), else none."""
    head = re.split(
        r"[.;:()?!\n]|\s(?:sorted|ordered|ranked|where|for|per|by|from|that|which|showing|rounded|"
        r"then|so|in|of|with|as|one|containing|listing|giving)\s",
        text + " ",
        maxsplit=1,
    )[0]
    parts = [p.strip() for p in re.split(r",\s*(?:and\s+)?|\s+and\s+|\s*&\s*", head) if p.strip()]
    names = []
    for p in parts:
        quoted = re.fullmatch(r"[`'\"]([^`'\"]+)[`'\"]", p)
        if quoted:
            names.append(quoted.group(1))
        elif re.fullmatch(r"[A-Za-z_][\w]*", p) and p.lower() not in _STOP:
            names.append(p)
        else:
            if whole:
                return []
            break
    if whole and (len(names) < 2 or head.strip() != text.strip()):
        return []
    return names if len(names) >= 2 or (names and re.search(r"[`'\"]", text[:40])) else []


def result_names(raw: str) -> tuple[str, ...]:
    found: list[str] = []
    patterns = [
        rf"`({_IDENT})\s*=",
        rf"\b(?:variable|dataframe|data frame|table|series|list|dict|dictionary|object|frame)\s+(?:called|named)\s+"
        rf"[`'\"]?({_IDENT})",
        rf"\b(?:store|save|assign|put|keep|leave|write)\w*\b[^.;]*?\b(?:in|as|to|into)\s+(?:a\s+(?:new\s+)?variable\s+)?"
        rf"`({_IDENT})`",
        rf"\b(?:named|called)\s+`({_IDENT})`",
        # "return `rents` with ...", "build a frame `hotel_stats` with ...": the result made under that name
        rf"\b(?:return|build|make|create|produce)\s+(?:(?:a|an|the|new)\s+)*(?:(?:data\s*)?frame|table|list|"
        rf"series|dict|variable\s+)?\s*`({_IDENT})`(?!\s*(?:\.|\[|column|table))",
    ]
    for p in patterns:
        for m in re.finditer(p, raw, re.I):
            name = m.group(1)
            if name not in found and name.lower() not in _STOP:
                found.append(name)
    return tuple(found)
