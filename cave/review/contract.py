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

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from typing import Any

__all__ = ["Contract", "read", "problems", "column_for"]

NUMBERS = {w: i for i, w in enumerate("zero one two three four five six seven eight nine ten".split())}
NUMBERS.update({"eleven": 11, "twelve": 12, "fifteen": 15, "twenty": 20, "a dozen": 12})
_NUM = r"(\d+|" + "|".join(sorted(NUMBERS, key=len, reverse=True)) + r")"
_IDENT = r"[A-Za-z_][\w]*"
DATE_PARTS = ("date", "day", "month", "year", "week", "quarter")
_STOP = frozenset(
    "and or with in for from where that which who whose sorted ordered ranked as over during between of "
    "on is are was were has have had showing rounded to across per by the a an than when if then using "
    "did does do got get gets at after before since until only each every s it its their them this these "
    "those there be been will would can should must not also into onto along plus excluding including "
    "give return too overall here now please separately respectively combined alone".split()
)
_NOT_GROUP_BEFORE_BY = frozenset(
    "sorted sort ordered order ranked rank caused divided multiplied followed increased increase "
    "decreased decrease rose rise fell fall grew grow dropped drop raised reduced changed change filled "
    "made written created owned handled served visited run managed placed booked submitted reported "
    "generated driven affected measured used given taken weighted replaced identified determined defined "
    "exceeded exceed beaten beat won lost scaled normalized normalised adjusted weighed covered shared "
    "explained accounted go went away stand side step one up down close passed issued approved signed "
    "assigned treated seen delivered shipped sold bought rated scored taught attended hosted operated".split()
)
_TIME_UNITS = {"day", "week", "month", "year", "hour", "minute", "quarter", "shift", "visit", "trip", "order"}
_RATE_UNITS = frozenset(
    "cent capita hour minute second head person unit mile km kilometer kilometre square hectare acre "
    "night litre liter kg kilogram pound gallon thousand million 100 1000 100k mille annum cubic seat".split()
)
_BEFORE_WHICH = frozenset(
    "in of for from at on to by with about and or know tell me see show find out determine identify say "
    "asking wondering is was".split()
)
_WHICH_VERBS = (
    r"has|had|have|is|was|were|are|did|does|do|got|gets|saw|sees|shows|showed|received|receives|recorded|records|"
    r"sold|sells|made|makes|earned|earns|spent|spends|generated|generates|contributed|performed|scored|took|takes|"
    r"ranks|ranked|leads|led|stands|stood|came|comes|brought|brings|produced|produces|needed|needs|used|uses|"
    r"accounts|accounted|holds|held|ships|shipped|logged|logs|charged|charges|paid|pays|cost|costs|grew|fell|"
    r"rose|dropped|increased|decreased|improved|saw|should|would|will|can|could|to|with|in|of|for|on|at|by"
)


@dataclass(frozen=True)
class Contract:
    """What the task's text asks the answer to be (None / empty where it does not say)."""

    outputs: tuple[str, ...] = ()
    columns: tuple[str, ...] = ()
    per: str | None = None
    order: str | None = None  # "asc" | "desc"
    top: int | None = None
    which: str | None = None
    count_of: str | None = None
    kind: str | None = None  # number count name list set date table frame bool
    decimals: int | None = None
    distinct: bool = False

    def describe(self) -> str:
        """One line for the prompt or a log: the fields the text set."""
        parts = [f"{k}={v!r}" for k, v in self.__dict__.items() if v not in (None, (), False)]
        return ", ".join(parts)


# -- reading -----------------------------------------------------------------------------------------------
def read(text: str) -> Contract:
    """The contract of a task's text (see the module's doc)."""
    raw = _clean(text)
    low = raw.lower()
    which = _which(low)
    count_of = _count_of(low)
    per = _per(low)
    top = _top(low)
    order = _order(low, top)
    columns = _columns(raw)
    decimals = _decimals(low)
    distinct = bool(re.search(r"\b(distinct|unique|different|without duplicates|no duplicates|deduplicated)\b", low))
    kind = _kind(low, which=which, count_of=count_of, per=per, top=top, order=order, columns=columns)
    if kind == "bool":
        per = None  # "... for every region?" asks one yes or no
    return Contract(
        outputs=_outputs(raw),
        columns=columns,
        per=per,
        order=order,
        top=top,
        which=which,
        count_of=count_of,
        kind=kind,
        decimals=decimals,
        distinct=distinct,
    )


def _clean(text: str) -> str:
    """The task's words: code blocks dropped (they are not the question), whitespace collapsed."""
    text = re.sub(r"```.*?```", " ", text, flags=re.S)
    # quoted passages of several words are content to write or look for, not the question's own words
    text = re.sub(r"(?<![\w`])(['\"])(?:(?!\1).){0,400}?\s\S+\s(?:(?!\1).){0,400}?\1(?!\w)", " QUOTE ", text)
    return re.sub(r"\s+", " ", text).strip()


def _number(word: str) -> int | None:
    word = word.lower()
    return int(word) if word.isdigit() else NUMBERS.get(word)


def _phrase(words: list[str], most: int = 3) -> str | None:
    """The noun phrase at the start of ``words``: up to ``most`` words, stopping at a function word."""
    out = []
    for w in words[:most]:
        w = w.strip("`'\"")
        if not w or w in _STOP or not re.fullmatch(r"[a-z][a-z0-9_\-]*", w):
            break
        out.append(w)
    return " ".join(out) or None


def _tail_words(low: str, start: int) -> list[str]:
    words = re.findall(r"[a-z0-9_\-`'\"]+|[,.;:?!()]", low[start:])[:6]
    return [re.sub(r"'s$", "", w) for w in words]  # "each region's share": the region


def _which(low: str) -> str | None:
    for m in re.finditer(r"(?<![,;]\s)(?<!,)\b(?:which|what)\s+(?:one\s+of\s+the\s+|of\s+the\s+)?([a-z][\w\-]*)", low):
        word = m.group(1)
        prev = re.findall(r"[a-z]+|[^\sa-z]", low[: m.start()])[-1:]
        if m.group(0).startswith("which") and prev and prev[0] not in _BEFORE_WHICH and prev[0].isalpha():
            continue  # "the shipments which arrived ...": a relative clause, not a question
        if word in _STOP or word in {
            "one",
            "percentage",
            "percent",
            "proportion",
            "share",
            "fraction",
            "number",
            "amount",
            "total",
            "average",
            "mean",
            "median",
            "value",
            "kind",
            "type",
            "sort",
        }:
            if word not in {"kind", "type"}:
                continue
        rest = low[m.end() :].lstrip()
        if re.match(r"[a-z]+ed\b", rest) and word not in _STOP:
            return word  # "which agent handled ...": a verb in the past tense follows the noun
        if re.match(rf"(?:{_WHICH_VERBS})\b", rest) or re.match(r"[a-z][\w\-]*\s+(?:" + _WHICH_VERBS + r")\b", rest):
            second = re.match(r"([a-z][\w\-]*)\s+(?:" + _WHICH_VERBS + r")\b", rest)
            if second and second.group(1) not in _STOP and not re.match(rf"(?:{_WHICH_VERBS})\b", rest):
                return f"{word} {second.group(1)}"
            return word
    m = re.search(
        r"\b(?:name|identify|find|report|give|return)\s+(?:me\s+)?the\s+([a-z][\w\-]*)\s+(?:with|that|which|whose|having)\b",
        low,
    )
    if m and m.group(1) not in _STOP:
        return m.group(1)
    return None


def _count_of(low: str) -> str | None:
    m = re.search(
        r"\b(?:how many|(?<!average )(?<!mean )(?<!median )(?<!by )(?<!most )(?<!highest )(?<!largest )(?<!lowest )"
        r"(?<!fewest )(?<!biggest )(?<!smallest )(?<!greatest )number of|count(?: the number of| of| the| how many)?|"
        r"tally(?: the| of)?)\s+(?:the\s+)?(?:distinct\s+|unique\s+|different\s+|separate\s+|individual\s+)?"
        r"([a-z][\w\-]*(?:\s+[a-z][\w\-]*)?)",
        low,
    )
    if not m:
        return None
    words = m.group(1).split()
    if words[0] in ("times", "of", "them", "it", "those", "these", "number", "each", "every", "per", "how"):
        return None
    if len(words) == 2 and not _plural(words[0]) and _plural(words[1]) and words[1] not in _STOP:
        return " ".join(words)  # "late orders", "new patients": an adjective and its noun
    return words[0] if words[0] not in _STOP else None


def _plural(word: str) -> bool:
    return word.endswith("s") and not word.endswith(("ss", "us", "is")) or word in ("people", "children", "staff")


_GROUP_STRONG = r"broken down by|grouped by|group by|for each|for every|in each|in every|within each|each"
_RANKING = re.compile(
    r"\b(?:top|bottom|rank|ranked|ranking|sort|sorted|in order|ordered|smallest|largest|cheapest|costliest|"
    r"busiest|quietest|best|worst|most|least|highest|lowest|biggest|first|last|fill|filled|split)\b"
)
_PERIODIC = {
    "monthly": "month",
    "weekly": "week",
    "daily": "day",
    "yearly": "year",
    "annual": "year",
    "quarterly": "quarter",
    "hourly": "hour",
}


def _per(low: str) -> str | None:
    """The X of "per X / for each X / by X" (strong phrasings first, then "by", then "per", then "monthly")."""
    for words in (_GROUP_STRONG, "by", "per"):
        pattern = rf"\b({words})\s+(?:the\s+|a\s+|an\s+|individual\s+|single\s+|distinct\s+)?"
        for m in re.finditer(pattern, low):
            phrase = _group_phrase(low, m)
            if phrase:
                return phrase
    m = re.search(r"\b(" + "|".join(_PERIODIC) + r")\b", low)
    if m and not re.search(r"\b(?:average|mean|median)\s+" + m.group(1), low):
        return _PERIODIC[m.group(1)]
    return None


def _group_phrase(low: str, m: re.Match[str]) -> str | None:
    """The grouping key after a "by / per / each" match, or None where the words mean something else."""
    word = m.group(1)
    before = low[: m.start()]
    clause = re.split(r"[,.;:?!]", before)[-1]
    prev = clause.split()[-1] if clause.split() else ""
    if word == "by" and (
        prev in _NOT_GROUP_BEFORE_BY or (prev.endswith("ed") and prev not in _GROUPING_VERBS) or _RANKING.search(clause)
    ):
        return None
    if word == "per" and _RANKING.search(clause) and not re.search(r"\b(?:average|mean|median|total)\b", clause):
        return None
    if word == "each" and (prev in ("for", "in", "within") or low[m.end() :].startswith("of ")):
        return None
    phrase = _phrase(_tail_words(low, m.end()), 2)
    if not phrase:
        return None
    first = phrase.split()[0]
    if first.isdigit() or first in ("how", "far", "one", "itself", "row", "rows", "record", "line", "hand"):
        return None
    if word == "per" and first in _RATE_UNITS:
        return None
    if len(phrase.split()) == 1 and first.endswith(("tion", "ing")) and first not in _KEYISH:
        return None  # "by interpolation", "by dropping": a method, not a key
    if re.search(r"\b(?:holds?|has|have|contains?|is|are)\s+(?:exactly\s+)?one\s+(?:row|record|line)\s*$", clause):
        return None  # "`df` holds one row per trip": a description of the data
    after = low[m.end() :]
    if re.match(r"\s*[\w\-]+(?:\s+[\w\-]+)?\s+(?:is|represents)\s+(?:one|a|an)\s+(?:row|record|line)\b", after):
        return None  # "each class is one row"
    if word == "per" and re.match(r"\s*[\w\-]+,?\s+on average\b", after):
        return None  # "spend per employee, on average": a rate
    words = phrase.split()
    if len(words) == 2 and (_plural(words[0]) or words[1] in _VERBISH):
        return words[0]
    return phrase


_KEYISH = frozenset(
    "station location region building position nation section division institution destination ring "
    "listing lodging wing clothing housing".split()
)
_GROUPING_VERBS = frozenset(
    "grouped aggregated summarized summarised totaled totalled averaged counted segmented broken".split()
)
_VERBISH = frozenset(
    "stock stocks sell sells sold have has had get gets make makes see sees spend spends use uses need "
    "needs earn earns report reports hold holds run runs serve serves take takes handle handles receive "
    "receives".split()
)


def _top(low: str) -> int | None:
    m = re.search(rf"\b(?:top|bottom|first|last)\s+{_NUM}\b", low) or re.search(
        rf"\b(?:the\s+)?{_NUM}\s+(?:largest|biggest|highest|most|lowest|smallest|least|best|worst|longest|shortest|"
        rf"busiest|cheapest|costliest|oldest|newest|latest|earliest|top|fastest|slowest|largest|heaviest|lightest|"
        rf"greatest|leading|biggest|most\s+\w+|least\s+\w+)\b",
        low,
    )
    m = m or re.search(
        rf"\b(?:which|the|find|list|name)\s+{_NUM}\s+[a-z][\w\-]*\s+(?:with|that|who|which|whose|by|having)?\s*"
        rf"(?:the\s+)?(?:most|highest|lowest|largest|smallest|fewest|least|best|worst|longest|shortest|biggest)\b",
        low,
    )
    if not m:
        return None
    n = _number(m.group(1))
    return n if n and n > 1 else None


def _order(low: str, top: int | None) -> str | None:
    desc = (
        r"\bdescending\b|\bdecreasing order\b|\b(?:highest|largest|biggest|most|greatest|best|top|newest|latest|"
        r"most recent|longest|busiest)\s+(?:\w+\s+)?first\b|\bfrom (?:the )?(?:highest|largest|biggest|most|greatest|"
        r"best|newest|latest|longest)\b|\bdesc\b|\bin reverse order\b"
    )
    asc = (
        r"\bascending\b|\bincreasing order\b|\b(?:lowest|smallest|least|fewest|cheapest|earliest|oldest|shortest|"
        r"worst)\s+(?:\w+\s+)?first\b|\bfrom (?:the )?(?:lowest|smallest|least|fewest|earliest|oldest|shortest)\b|"
        r"\balphabetical|\bchronological"
    )
    if re.search(desc, low):
        return "desc"
    if re.search(asc, low):
        return "asc"
    if top and re.search(r"\bbottom\s+" + _NUM, low):
        return "asc"
    if top and re.search(r"\b(?:top|largest|biggest|highest|most|best|greatest|busiest|longest|leading)\b", low):
        return "desc"
    return None


def _columns(raw: str) -> tuple[str, ...]:
    """Result columns the text names: "with columns `a`, `b`", "a DataFrame with columns region and total"."""
    pattern = re.compile(
        r"\b(?:with|having|containing|has|have|include|including|showing|into|and|two|three|four)\s+"
        r"(?:the\s+|two\s+|three\s+|four\s+|exactly\s+|only\s+|just\s+)?(?:output\s+|result\s+)?columns?\b"
        r"(?:\s+(?:named|called))?\s*:?\s*",
        re.I,
    )
    for m in pattern.finditer(raw):
        items = _listed(raw[m.end() :])
        if items:
            return tuple(items)
    return ()


def _listed(text: str) -> list[str]:
    """The names listed at the start of ``text``: `a`, `b` and `c`; 'a', "b"; plain words a, b and c."""
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
            break
    return names if len(names) >= 2 or (names and re.search(r"[`'\"]", text[:40])) else []


def _outputs(raw: str) -> tuple[str, ...]:
    found: list[str] = []
    patterns = [
        rf"`({_IDENT})\s*=",
        rf"\b(?:variable|dataframe|data frame|table|series|list|dict|dictionary|object|frame)\s+(?:called|named)\s+"
        rf"[`'\"]?({_IDENT})",
        rf"\b(?:store|save|assign|put|keep|leave|write)\w*\b[^.;]*?\b(?:in|as|to|into)\s+(?:a\s+(?:new\s+)?variable\s+)?"
        rf"`({_IDENT})`",
        rf"\b(?:named|called)\s+`({_IDENT})`",
    ]
    for p in patterns:
        for m in re.finditer(p, raw, re.I):
            name = m.group(1)
            if name not in found and name.lower() not in _STOP:
                found.append(name)
    return tuple(found)


def _decimals(low: str) -> int | None:
    m = re.search(rf"\b{_NUM}\s+(?:decimal|decimals|decimal places|decimal digits|digits after the decimal)\b", low)
    if m and re.search(r"round|decimal", low):
        return _number(m.group(1))
    m = re.search(r"\b(?:one|1) decimal\b", low)
    if m:
        return 1
    if re.search(r"\b(?:whole number|nearest integer|nearest whole|as an integer|no decimals)\b", low):
        return 0
    if re.search(r"\bnearest tenth\b", low):
        return 1
    if re.search(r"\bnearest hundredth\b", low):
        return 2
    return None


_MEASURES = re.compile(
    r"\b(mean|average|median|total|sum|share|percentage|percent|proportion|ratio|std|standard deviation|variance|"
    r"correlation|p-value|p value|statistic|label|maximum|minimum|max|min|range|skewness|kurtosis|mode|count|"
    r"slope|intercept|coefficient|r-squared|rmse|mse|mae|accuracy|rate|iqr|quartile|percentile|how many)\b"
)


def several(text: str) -> bool:
    """Whether the text asks for several answers at once ("the mean, the share above 5 and the label";
    "@mean[...] @std[...]"; two questions): its answer is a collection of them, not one value of one kind.

    >>> several("Mean score, share above 5 (%), and the label?"), several("What is the mean wait?")
    (True, False)
    """
    low = text.lower()
    if len(re.findall(r"@\w+\[", low)) >= 2 or low.count("?") >= 2:
        return True
    return len(set(_MEASURES.findall(low)) - {"rate", "range"}) >= 2 and bool(re.search(r",|\band\b", low))


def _kind(
    low: str,
    *,
    which: str | None,
    count_of: str | None,
    per: str | None,
    top: int | None,
    order: str | None,
    columns: tuple[str, ...],
) -> str | None:
    if several(low) or re.search(r"final_answer\(|@\w+\[|\{\s*['\"]\w+['\"]\s*:", low):
        return None  # several answers, or a form the task spells out itself (cave.review.answers checks that)
    if re.match(r"(?:is|are|was|were|does|do|did|has|have|can|should|will)\b", low) or re.search(
        r"\byes or no\b|\btrue or false\b|\byes/no\b", low
    ):
        return "bool"
    if len(columns) >= 2:
        return "frame"
    if which:
        head = which.split()[-1]
        if head in DATE_PARTS or re.search(r"\b(?:when|on which day|on what day|what date)\b", low):
            return "date"
        if top or head.endswith("s") and not head.endswith(("ss", "us", "is")):
            return "list" if order or top else "set"
        return "name"
    if re.search(
        r"\b(?:when did|on which day|on what day|what date|which date|what month|which month|what year|"
        r"which year|which day|which week|which quarter)\b",
        low,
    ):
        return "date"
    if count_of and not per:
        return None if _enumerates(low) else "count"
    if top:
        return "list"
    if per:
        rate = per.split()[0] in _TIME_UNITS and not re.search(r"\b(?:for each|each|every|broken down|by)\b", low)
        return "number" if rate and re.search(r"\b(?:average|mean|median)\b", low) else "table"
    if re.search(r"\b(?:list|which|what are)\b[^.?]*\b(?:distinct|unique|all)\b", low):
        return "set"
    if re.search(
        r"\bhow (?:much|long|old|far|often)\b|\b(?:average|mean|median|total|sum|ratio|percentage|percent|"
        r"share|proportion|rate|correlation|standard deviation|std|variance|difference|maximum|minimum|"
        r"range|slope|coefficient|p-value|p value|statistic|skewness|kurtosis|mode|growth)\b",
        low,
    ):
        return "number" if _asks_value(low) and not (_enumerates(low) or re.match(_CHANGES, low)) else None
    return None


def _asks_value(low: str) -> bool:
    """A question or a request for a value ("What is ...?", "Compute the mean ...", "Median price"), not a
    request to do something that mentions a measure ("could you jot down ...")."""
    return bool(
        "?" in low
        or re.match(r"(?:what|how|compute|calculate|find|give|return|report|determine|tell|get|show|estimate)\b", low)
        or len(low.split()) <= 8
    )


# a task that changes or builds objects ("Add a column `share` ..."): its answer is what it built, not a number
_CHANGES = (
    r"(?:please\s+)?(?:add|create|make|build|clean|merge|join|fill|drop|rename|convert|sort|filter|append|update|"
    r"replace|remove|keep|set|load|read|save|store|write|pivot|reshape|standardi[sz]e|normali[sz]e|impute|"
    r"combine|split|parse|fix|deduplicate|tidy|prepare|transform|aggregate|flag|mark|label|tag|assign)\b"
)


def _enumerates(low: str) -> bool:
    """ "... of children (0-12), adults (13-59) and the old?": a list of things, each with its own value."""
    return bool(re.search(r",[^.?!;]*\band\b", low))


# -- checking ----------------------------------------------------------------------------------------------
def problems(contract: Contract, answer: Any, tables: dict[str, Any] | None = None) -> list[str]:
    """What in ``answer`` contradicts ``contract`` (given the task's tables), each with the fix; [] if nothing.

    >>> import pandas as pd
    >>> visits = pd.DataFrame({"clinic": ["a", "a", "b"], "wait": [1.0, 3.0, 5.0]})
    >>> problems(read("What is the median wait per clinic?"), visits.assign(m=visits.groupby("clinic")["wait"].transform("median")), {"visits": visits})[0][:60]
    'one row per clinic: the given tables have 2 distinct clinic,'
    >>> problems(read("How many clinics are there?"), visits, {"visits": visits})[0][:45]
    'a count: the task asks how many clinics, the '
    >>> problems(read("Which clinic has the longest wait?"), "b", {"visits": visits})
    []
    """
    tables = tables or {}
    out: list[str] = []
    kind = contract.kind
    try:
        if kind in ("number", "count"):
            out += _scalar_number(contract, answer, integral=kind == "count")
        elif kind == "name":
            out += _name(contract, answer, tables)
        elif kind in ("list", "set"):
            out += _items(contract, answer)
        elif kind == "table" or (contract.per and _rows(answer) is not None):
            out += _per_group(contract, answer, tables)
        if contract.columns and _is_frame(answer):
            out += _named_columns(contract, answer)
        if contract.order and kind in ("list", "table", "frame"):
            out += _ordered(contract, answer)
        if contract.count_of and kind == "count" and not out:
            out += _entity_count(contract, answer, tables)
    except Exception:  # a check that cannot read the answer says nothing rather than something wrong
        return out
    return out


def _texty(x: Any) -> bool:
    """A column or index of text (object dtype, or pandas' string dtype)."""
    import pandas as pd

    return x.dtype == object or pd.api.types.is_string_dtype(x.dtype)


def _type(answer: Any) -> str:
    return type(answer).__name__


def _is_frame(x: Any) -> bool:
    return _type(x) == "DataFrame"


def _is_series(x: Any) -> bool:
    return _type(x) == "Series"


def _rows(x: Any) -> int | None:
    if _is_frame(x) or _is_series(x) or isinstance(x, dict | list | tuple):
        return len(x)
    return None


def _as_number(x: Any) -> float | None:
    if isinstance(x, bool):
        return None
    if isinstance(x, int | float):
        return float(x)
    if type(x).__module__ == "numpy" and hasattr(x, "item") and getattr(x, "size", 1) == 1:
        v = x.item()
        return float(v) if isinstance(v, int | float) and not isinstance(v, bool) else None
    if isinstance(x, str):
        try:
            return float(x.strip().replace(",", "").rstrip("%"))
        except ValueError:
            return None
    return None


def _scalar_number(contract: Contract, answer: Any, *, integral: bool) -> list[str]:
    what = f"how many {contract.count_of}" if integral and contract.count_of else "for one number"
    label = "a count" if integral else "a number"
    x = _as_number(answer)
    if x is None and (_rows(answer) == 1 or (_is_frame(answer) and answer.size == 1)):
        x = _as_number(_only_value(answer))  # {'mean': 2.5}, a one-row Series: one value all the same
    if x is None:
        return [
            f"{label}: the task asks {what}, the answer is a {_type(answer)} "
            f"({_preview(answer)}): compute the single value and pass it to final_answer"
        ]
    if integral and not (math.isfinite(x) and x == int(x) and x >= 0):
        return [f"a count: the task asks {what}, the answer {x!r} is not a whole number of them"]
    if not math.isfinite(x):
        return [f"a number: the answer is {x!r}: check for missing values (dropna()) or an empty selection"]
    return []


def _only_value(answer: Any) -> Any:
    if isinstance(answer, dict):
        return next(iter(answer.values()))
    if _is_frame(answer):
        return answer.iat[0, 0] if answer.size == 1 else None
    if _is_series(answer):
        return answer.iloc[0]
    return answer[0] if isinstance(answer, list | tuple) else None


def _preview(x: Any) -> str:
    text = repr(x) if not (_is_frame(x) or _is_series(x)) else f"{len(x)} rows"
    return text if len(text) <= 60 else text[:57] + "..."


def _name(contract: Contract, answer: Any, tables: dict[str, Any]) -> list[str]:
    if _rows(answer) is not None and not isinstance(answer, str):
        n = _rows(answer)
        if n != 1:
            return [
                f"one {contract.which}: 'which {contract.which}' asks for one value, the answer is a "
                f"{_type(answer)} of {n}: pass the single {contract.which} (e.g. `.idxmax()`)"
            ]
        return []
    found = column_for(contract.which or "", tables)
    if found is None or not isinstance(answer, str):
        return []
    table, col = found
    values = tables[table][col].dropna().astype(str)
    keys = {_norm(v) for v in values}
    if _norm(answer) in keys:
        return []
    other = _column_holding(answer, tables)
    if other and other != (table, col):
        return [
            f"'which {contract.which}' asks for a value of {table}[{col!r}]; the answer {answer!r} is a value of "
            f"{other[0]}[{other[1]!r}]: answer with the {col} of that row"
        ]
    return []


def _norm(value: Any) -> str:
    return re.sub(r"[\W_]+", "", str(value).casefold())


def _column_holding(value: str, tables: dict[str, Any]) -> tuple[str, str] | None:
    key = _norm(value)
    for t, df in tables.items():
        for c in df.columns:
            if _texty(df[c]) and key in {_norm(v) for v in df[c].dropna().astype(str).unique()[:5000]}:
                return t, str(c)
    return None


def column_for(phrase: str, tables: dict[str, Any]) -> tuple[str, str] | None:
    """The given column a phrase of the task names ("clinic" -> visits['clinic_name']), or None when none or
    several do.

    >>> import pandas as pd
    >>> column_for("patients", {"v": pd.DataFrame({"patient_id": [1], "clinic": ["a"]})})
    ('v', 'patient_id')
    """
    words = [w for w in re.split(r"[\s\-_]+", phrase.lower()) if w]
    if not words:
        return None
    stems = {_stem(w) for w in words}
    head = _stem(words[-1])
    exact, partial = [], []
    for t, df in tables.items():
        for c in df.columns:
            parts = [p for p in re.split(r"[\s\-_.]+|(?<=[a-z])(?=[A-Z])", str(c)) if p]
            col_stems = {_stem(p.lower()) for p in parts}
            if "".join(sorted(col_stems)) == "".join(sorted(stems)) or _stem(_norm(c)) == _stem("".join(words)):
                exact.append((t, str(c)))
            elif head in col_stems and col_stems - stems <= {"id", "name", "code", "no", "number", "key", "type"}:
                partial.append((t, str(c)))
    for found in (exact, partial):
        names = {c for _, c in found}
        if len(names) == 1:
            return found[0]
    return None


def _stem(word: str) -> str:
    for suffix in ("ies", "es", "s"):
        if word.endswith(suffix) and len(word) > len(suffix) + 2:
            return word[: -len(suffix)] + ("y" if suffix == "ies" else "")
    return word


def _items(contract: Contract, answer: Any) -> list[str]:
    items = _as_items(answer)
    if items is None:
        return []
    out = []
    if contract.distinct or contract.kind == "set":
        seen = [_norm(i) for i in items]
        if len(set(seen)) < len(seen):
            dup = len(seen) - len(set(seen))
            out.append(
                f"distinct values: the answer lists {dup} value(s) more than once: drop the duplicates "
                "(`.unique()` / `drop_duplicates()`)"
            )
    if contract.top and len(items) > contract.top:
        out.append(
            f"top {contract.top}: the answer has {len(items)} items: keep the first {contract.top} "
            "(`.head(n)` after sorting)"
        )
    return out


def _as_items(answer: Any) -> list[Any] | None:
    if isinstance(answer, list | tuple | set):
        return list(answer)
    if _is_series(answer):
        return list(answer.index if answer.dtype.kind in "fi" and _texty(answer.index) else answer)
    if _is_frame(answer):
        return list(answer.iloc[:, 0]) if answer.shape[1] >= 1 else None
    if type(answer).__name__ in ("ndarray", "Index"):
        return list(answer)
    return None


def _per_group(contract: Contract, answer: Any, tables: dict[str, Any]) -> list[str]:
    per = contract.per or ""
    n = _rows(answer)
    distinct = _distinct_count(per, tables)
    if distinct is None:
        return []  # "per X" names nothing in the given data: nothing to count the rows against
    if n is None:
        if contract.kind == "table" and _as_number(answer) is not None and distinct > 1:
            return [
                f"one value per {per}: the answer is a single number; group by the {per} "
                f"(`groupby(...).agg(...)`) and pass the table"
            ]
        return []
    if n > distinct:
        return [
            f"one row per {per}: the given tables have {distinct} distinct {per}, the answer has {n} rows "
            f"(one per input row?): aggregate with `groupby(...).agg(...)`, not `transform` or a merge"
        ]
    keys = _keys(answer)
    if keys is not None and len(set(map(_norm, keys))) < len(keys):
        return [f"one row per {per}: the answer repeats a {per}: aggregate so each {per} appears once"]
    return []


def _distinct_count(per: str, tables: dict[str, Any]) -> int | None:
    import pandas as pd

    found = column_for(per, tables)
    if found is not None:
        return int(tables[found[0]][found[1]].nunique())
    head = per.split()[-1] if per else ""
    if head not in ("month", "year", "quarter", "week"):
        return None
    counts = []
    for df in tables.values():
        for c in df.columns:
            s = df[c]
            if pd.api.types.is_datetime64_any_dtype(s):
                dates = s
            elif _texty(s) and re.search(r"date|time|day|month", str(c), re.I):
                dates = pd.to_datetime(s, errors="coerce", format="mixed")
            else:
                continue
            if dates.notna().mean() < 0.8:
                continue
            period = {"month": "M", "year": "Y", "quarter": "Q", "week": "W"}[head]
            counts.append(int(dates.dropna().dt.to_period(period).nunique()))
    return max(counts) if counts else None


def _keys(answer: Any) -> list[Any] | None:
    if isinstance(answer, dict):
        return None  # keys of a dict are unique by construction
    if _is_series(answer):
        return list(answer.index) if _texty(answer.index) else None
    if _is_frame(answer):
        if _texty(answer.index) and answer.index.name is not None:
            return list(answer.index)
        text = [c for c in answer.columns if _texty(answer[c])]
        return list(answer[text[0]]) if len(text) == 1 else None
    return None


def _named_columns(contract: Contract, answer: Any) -> list[str]:
    have = {_norm(c) for c in answer.columns} | {_norm(n) for n in answer.index.names if n is not None}
    missing = [c for c in contract.columns if _norm(c) not in have]
    if not missing:
        return []
    return [
        f"columns: the task names the columns {', '.join(map(repr, contract.columns))}; the answer has "
        f"{', '.join(map(repr, map(str, answer.columns)))} (missing {', '.join(map(repr, missing))}): rename them "
        "(`.rename(columns={...})`, `.reset_index()`)"
    ]


def _ordered(contract: Contract, answer: Any) -> list[str]:
    values = None
    if _is_series(answer) and answer.dtype.kind in "fiu":
        values = list(answer)
    elif isinstance(answer, dict) and all(_as_number(v) is not None for v in answer.values()):
        values = [_as_number(v) for v in answer.values()]
    elif _is_frame(answer):
        numeric = [c for c in answer.columns if answer[c].dtype.kind in "fiu"]
        if numeric and not any(_monotonic(list(answer[c]), contract.order) for c in numeric):
            return [
                f"order: the task asks for {'highest' if contract.order == 'desc' else 'lowest'} first; no "
                f"numeric column of the answer is sorted that way: `.sort_values(..., ascending="
                f"{contract.order == 'asc'})`"
            ]
        return []
    if values and len(values) > 1 and not _monotonic(values, contract.order):
        return [
            f"order: the task asks for {'highest' if contract.order == 'desc' else 'lowest'} first; the answer "
            f"is not sorted that way: `.sort_values(ascending={contract.order == 'asc'})`"
        ]
    return []


def _monotonic(values: list[Any], order: str | None) -> bool:
    clean = [v for v in values if v == v]  # NaN aside
    pairs = list(zip(clean, clean[1:], strict=False))
    return all(a >= b for a, b in pairs) if order == "desc" else all(a <= b for a, b in pairs)


def _entity_count(contract: Contract, answer: Any, tables: dict[str, Any]) -> list[str]:
    x = _as_number(answer)
    found = column_for(contract.count_of or "", tables)
    if x is None or found is None:
        return []
    df = tables[found[0]]
    rows, distinct = len(df), int(df[found[1]].nunique())
    if int(x) == rows and distinct != rows:
        return [
            f"a count of {contract.count_of}: the answer {int(x)} is the number of rows of {found[0]}, which holds "
            f"{distinct} distinct {found[1]}: count each {contract.count_of.rstrip('s')} once (`.nunique()`), "
            "after any filter the task asks for"
        ]
    return []


# -- the note ----------------------------------------------------------------------------------------------
CONTRACT_HOLDS = 2  # holds for the contract in one run; an answer that still breaks it ends unverified
NOTE_HEAD = "Not accepted yet: the answer does not fit what the task asks for"


def note(found: list[str]) -> str:
    """What the model reads when its answer breaks the task's contract.

    >>> print(note(["a count: ..."]))
    Not accepted yet: the answer does not fit what the task asks for:
    - a count: ...
    Fix it and call final_answer again (if the task really asks for this answer, send it again unchanged).
    """
    lines = "\n".join(f"- {p}" for p in found)
    return (
        f"{NOTE_HEAD}:\n{lines}\nFix it and call final_answer again (if the task really asks for this answer, "
        "send it again unchanged)."
    )
