"""Reading a task's contract from its text (``read``): the general rules, no task's own words.

See ``cave.review.contract`` for what a contract holds and how it is checked.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from cave.review.contract.names import result_columns, result_names
from cave.review.contract.words import STOP as _STOP

__all__ = ["Contract", "read"]

NUMBERS = {w: i for i, w in enumerate("zero one two three four five six seven eight nine ten".split())}
NUMBERS.update({"eleven": 11, "twelve": 12, "fifteen": 15, "twenty": 20, "a dozen": 12})
_NUM = r"(\d+|" + "|".join(sorted(NUMBERS, key=len, reverse=True)) + r")"
DATE_PARTS = ("date", "day", "month", "year", "week", "quarter")
_NOT_GROUP_BEFORE_BY = frozenset(
    "sorted sort ordered order ranked rank caused divided multiplied followed increased increase "
    "decreased decrease rose rise fell fall grew grow dropped drop raised reduced changed change filled "
    "made written created owned handled served visited run managed placed booked submitted reported "
    "generated driven affected measured used given taken weighted replaced identified determined defined "
    "exceeded exceed beaten beat won lost scaled normalized normalised adjusted weighed covered shared "
    "explained accounted go went away stand side step one up down close passed issued approved signed "
    "assigned treated seen delivered shipped sold bought rated scored taught attended hosted operated sent paid "
    "done flown brought built spent caught chosen drawn kept held shown known told thrown worn ridden carried".split()
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
    agg: str | None = None  # what one value per group is: "median" "mean" "sum" "count" (where the text says)
    repeats: bool = False  # the items are values of N ranked things and may repeat ("the artists of the 3 top songs")

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
    columns = result_columns(raw)
    decimals = _decimals(low)
    distinct = bool(re.search(r"\b(distinct|unique|different|without duplicates|no duplicates|deduplicated)\b", low))
    kind = _kind(low, which=which, count_of=count_of, per=per, top=top, order=order, columns=columns)
    if kind in ("bool", "number") and per:
        per = None  # "... for every region?" asks one yes or no; "the average number of X per Y" one mean
    return Contract(
        outputs=result_names(raw),
        columns=columns,
        per=per,
        order=order,
        top=top,
        which=which,
        count_of=count_of,
        kind=kind,
        decimals=decimals,
        distinct=distinct,
        agg=_agg(low) if per else None,
        repeats=bool(top) and not distinct and bool(re.search(rf"\b[a-z]+\s+of\s+the\s+(?:top\s+)?{_NUM}\s", low)),
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


def _asked_after_comma(low: str, m: re.Match) -> bool:
    """Whether "which/what X" after a comma asks a question ("In the shop database (two tables), which customer has
    the most orders?"), not a relative clause ("the orders, which were late, ..."): a noun, not a verb, follows
    it, and its sentence ends with a question mark.

    >>> m = re.search(r"which (\\w+)", low := "in the shop (a, b), which customer has the most orders?")
    >>> _asked_after_comma(low, m)
    True
    >>> m = re.search(r"which (\\w+)", low := "count the orders, which were late, by region.")
    >>> _asked_after_comma(low, m)
    False
    """
    word = m.group(m.lastindex or 0)  # the noun: the last group (a "which 2 ..." count comes before it)
    if word in _STOP or re.fullmatch(rf"(?:{_WHICH_VERBS})|[a-z]+ed", word):
        return False
    end = re.search(r"[.?!](?:\s|$)", low[m.end() :])
    return bool(end) and end.group(0).startswith("?")


def _which(low: str) -> str | None:
    # "which 2 regions ...": the count is the contract's top, the noun is still the X
    for m in re.finditer(rf"\b(?:which|what)\s+(?:one\s+of\s+the\s+|of\s+the\s+)?(?:{_NUM}\s+)?([a-z][\w\-]*)", low):
        word = m.group(2)
        prev = re.findall(r"[a-z]+|[^\sa-z]", low[: m.start()])[-1:]
        if prev and prev[0] in ",;" and not _asked_after_comma(low, m):
            continue  # "the orders, which were late": a relative clause
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
        r"\b(?:name|identify|find|report|give|return)\s+(?:me\s+)?the\s+([a-z][\w\-]*)\s+(?:with|that|which|whose|having)\b"
        # "what is the name of the branch with ...", "the name of the youngest billionaire"
        r"|\bthe names? of the\s+(?:(?:\d+|[a-z]+est|most\s+[a-z]+|least\s+[a-z]+)\s+){0,2}([a-z][\w\-]*)\b"
        r"|\b(?:out of|among|of all)\s+(?:all\s+)?(?:the\s+|our\s+)?([a-z][\w\-]*),\s+which\b",  # "of all stores, which"
        low,
    )
    word = next((g for g in m.groups() if g), None) if m else None
    if word and word not in _STOP:
        return word
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


_AGGREGATES = (
    ("median", r"\bmedians?\b"),
    ("mean", r"\b(?:average|avg|mean)\b"),
    ("count", r"\b(?:how many|number of|count of|counts?)\b"),
    ("sum", r"\b(?:total|sum|revenue|spend|spent)\b"),
)


def _agg(low: str) -> str | None:
    """What the one value per group is, where the text names it (the first named of median, mean, count, sum).

    >>> _agg("median wait per ward"), _agg("average price by city"), _agg("revenue per hotel"), _agg("visits per day")
    ('median', 'mean', 'sum', None)
    """
    return next((name for name, pattern in _AGGREGATES if re.search(pattern, low)), None)


def _per(low: str) -> str | None:
    """The X of "per X / for each X / by X" (strong phrasings first, then "by", then "per", then "monthly").

    >>> _per("show me each department's headcount"), _per("median latency for each of the services")
    ('department', 'services')
    >>> _per("per-store revenue"), _per("per-capita income by year"), _per("the mean of each of the two columns")
    ('store', 'year', None)
    """
    m = re.search(r"\b(?:each|every)\s+([a-z][\w\-]*)'s\b", low)  # "each department's headcount"
    if m and m.group(1) not in _STOP:
        return m.group(1)
    m = re.search(r"\bper-([a-z][a-z]+)\b", low)  # "per-store revenue"; "per-capita" is a rate
    if m and m.group(1) not in _RATE_UNITS:
        return m.group(1)
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
    if word == "per" and re.search(
        r"\b(?:values?|data|entr(?:y|ies)|missing|nulls?|blanks?|nan|column|field)\s+(?:for|in|of|on)\s+"
        r"(?:the\s+)?[a-z][\w\-]*\s*$",
        clause,
    ):
        return None  # "no value for reviews per month": a column named by its rate, not a grouping
    if word.endswith("each") and low[m.end() :].startswith("of "):
        # "for each of the services" groups by service; "each of the two columns" counts things, it does not group
        of = re.match(r"of\s+(?:the|its|our|their|your)\s+([a-z][\w\-]*s)\b", low[m.end() :])
        return of.group(1) if of and of.group(1) not in _STOP and of.group(1) not in ("columns", "rows") else None
    if word == "each" and prev in ("for", "in", "within"):
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


# the words that rank: "the 3 largest", "the 2 countries with the youngest", "the highest 3"
_RANKS = (
    r"largest|biggest|highest|most|lowest|smallest|least|fewest|best|worst|longest|shortest|busiest|cheapest|"
    r"costliest|oldest|newest|latest|earliest|fastest|slowest|heaviest|lightest|greatest|richest|poorest|youngest|"
    r"tallest|priciest|hottest|coldest|warmest|strongest|weakest|safest|loudest|quietest"
)


def _top(low: str) -> int | None:
    m = re.search(rf"\b(?:top|bottom|first|last)\s+{_NUM}\b", low) or re.search(
        rf"\b(?:the\s+)?{_NUM}\s+(?:{_RANKS}|top|leading|most\s+\w+|least\s+\w+)\b", low
    )
    # "the highest 3 salaries", "lowest 4 scores": the superlative before the number
    m = m or re.search(rf"\b(?:{_RANKS})\s+{_NUM}\s+(?!percent\b|%|decimal|digit)[a-z]", low)
    m = m or re.search(
        rf"\b(?:which|what|the|find|list|name)\s+{_NUM}\s+(?:[a-z][\w\-]*\s+){{1,3}}"
        rf"(?:with|that|who|which|whose|by|having|has|have|had|got|get|saw|see|show|showed|sold|made|earned)?\s*"
        rf"(?:the\s+)?(?:{_RANKS})\b",
        low,
    )
    if not m:
        return None
    n = _number(m.group(1))
    return n if n and n > 1 else None


_SUPERLATIVE = re.compile(
    r"\bthe\s+(?:most|least|fewest|highest|lowest|largest|smallest|biggest|best|worst|greatest)\b|\bthe\s+[a-z]+est\b"
    r"|\b[a-z]+est\b(?=[?.!]*$)"
)


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
    high = r"(?:highest|largest|biggest|most|greatest|best|top|newest|latest|longest|most expensive)"
    low_ = r"(?:lowest|smallest|least|fewest|worst|bottom|oldest|earliest|shortest|cheapest|least expensive)"
    desc += rf"|\b{high}\s+to\s+(?:the\s+)?{low_}\b"
    asc += rf"|\b{low_}\s+to\s+(?:the\s+)?{high}\b"
    if re.search(desc, low):
        return "desc"
    if re.search(asc, low):
        return "asc"
    if top and re.search(r"\bbottom\s+" + _NUM, low):
        return "asc"
    # "oldest" is the highest age but the lowest date: without "first" it implies no order
    implied_low = low_.replace("oldest|", "")
    if top and re.search(rf"\b{implied_low}\b", low) and not re.search(rf"\b{high}\b", low):
        return "asc"  # "the three regions with the lowest churn"
    if top and re.search(r"\b(?:top|largest|biggest|highest|most|best|greatest|busiest|longest|leading)\b", low):
        return "desc"
    return None


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
    r"correlation|p-value|p value|statistic|label|maximum|minimum|max|min|range|skewness|kurtosis|count|"
    r"(?<=the )mode|mode(?= of\b)|"  # the statistic, not a column's value ("songs in a major mode")
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
    stated = _stated_kind(low)
    if stated is not None:  # "The answer is a list of numbers.", "Answer type: boolean", "-> list[category]"
        return ("list" if order or top else "set") if stated == "items" else stated
    said = re.search(r"\byes or no\b|\btrue or false\b|\byes/no\b", low)
    if said or re.match(r"(?:is|are|was|were|does|do|did|has|have|can|should|will)\b", low):
        # "Is the mean higher for A or B?" asks which of two, not yes or no
        return "bool" if said or not re.search(r"\bor\b(?!\s+not\b)", low) else None
    if len(columns) >= 2:
        return "frame"
    if which:
        head = which.split()[-1]
        if head in DATE_PARTS or re.search(r"\b(?:when|on which day|on what day|what date)\b", low):
            return "date"
        plural = head.endswith("s") and not head.endswith(("ss", "us", "is"))
        if plural and not top and re.search(r"\b(?:which|what) one of\b", low):
            return "name"
        if (
            plural
            and not top
            and re.search(r"\b(?:which of the|of all|out of|among)\b", low)
            and _SUPERLATIVE.search(low)
        ):
            return "name"  # "which of the products sold the fewest units?": one of them
        if top or plural:
            return "list" if order or top else "set"
        return "name"
    if re.search(
        r"\b(?:when (?:did|was|were|is|are|does|do|has|had)|on which day|on what day|what date|which date|"
        r"what month|which month|what year|"
        r"which year|which day|which week|which quarter)\b",
        low,
    ):
        return "date"
    if count_of and not per:
        return None if _enumerates(low) else "count"
    if top:
        return "list"
    if per:
        if re.search(
            r"\b(?:average|mean|median)\s+(?:number|count|amount|quantity)\s+of\s+[a-z][\w\s\-]{0,30}?\bper\s", low
        ):
            return "number"  # "the average number of reviews per listing": one mean over the listings
        rate = per.split()[0] in _TIME_UNITS and not re.search(r"\b(?:for each|each|every|broken down|by)\b", low)
        return "number" if rate and re.search(r"\b(?:average|mean|median)\b", low) else "table"
    if re.search(r"\b(?:list|which|what are)\b[^.?]*\b(?:distinct|unique|all)\b", low):
        return "set"
    if re.match(
        r"(?:please\s+)?list\s+(?:all\s+)?the\s+(?:[a-z][\w\-]*\s+){0,2}?[a-z][\w\-]*s\s+(?:with|that|which|"
        r"whose|having|where|who)\b",
        low,
    ):
        return "set"  # "list the streets with an unpaid ticket": each street once, in no order asked
    if re.search(
        r"\bhow (?:much|long|old|far|often)\b|\b(?:average|mean|median|total|sum|ratio|percentage|percent|"
        r"share|proportion|rate|correlation|standard deviation|std|variance|difference|maximum|minimum|"
        r"range|slope|coefficient|p-value|p value|statistic|skewness|kurtosis|mode|growth)\b",
        low,
    ):
        return "number" if _asks_value(low) and not (_enumerates(low) or re.match(_CHANGES, low)) else None
    return None


# the kind of answer a task states in so many words: "The answer is a number", "Answer type: list[category]",
# "Return a boolean", a function signature's "-> list[number]" (a tabular-QA harness that names the type)
_STATED = re.compile(
    r"(?:\banswer(?:\s+type)?\s*(?:is|should be|must be|will be|:)|\breturn(?:s)?(?:\s+type\s*:)?|->)\s*"
    r"(?:(?:an?|one|exactly one|a single)\s+)?(?:python\s+)?"
    r"(list\s*\[\s*(?:category|number|str|int|float)\s*\]|list of [a-z]+|list|set|boolean|bool\b|true or false|"
    r"yes or no|number(?!\s+of\b)|integer|float)"
)
_STATED_KINDS = {"boolean": "bool", "bool": "bool", "true or false": "bool", "yes or no": "bool",
                 "number": "number", "integer": "number", "float": "number"}  # fmt: skip


def _stated_kind(low: str) -> str | None:
    """The answer kind a task states outright ('items' for a list or a set: its order is read elsewhere), else None.

    >>> _stated_kind("which city? the answer is one value."), _stated_kind("is it above 3? answer type: boolean")
    (None, 'bool')
    >>> _stated_kind("the two highest prices. the answer is a python list of numbers."), _stated_kind("-> number")
    ('items', 'number')
    """
    m = _STATED.search(low)
    if m is None:
        return None
    word = m.group(1)
    return "items" if word.startswith(("list", "set")) else _STATED_KINDS.get(word)


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
