"""Which estimator a value is, against what its name and the task say: a statistic computed by another one's
function (``skewness_value = kurtosis(x)``: a development task), the other standard deviation than the task names
(pandas' ``.std()`` is the sample one, ``np.std`` the population one: 129), Pearson's kurtosis where the task says
Fisher's (222), pandas' bias-corrected ``.skew()``/``.kurt()`` where it says scipy's (375), the constant the
task adds to a denominator added to the numerator (272), a test's (statistic, p-value) unpacked the other way round
(684), and a step drawn at random without the random state the task fixes (674). The bounds a task's words set
have their own module, ``cave.review.bounds``.

Each check reads only the code (and the task) and returns the lines it finds, as ``line N: `source` ...``;
``cave.review.misreadings`` turns them into the note that holds an answer once.
"""

from __future__ import annotations

import ast
import re

__all__ = [
    "all_nodes",
    "DENOMINATOR_NOTE",
    "FISHER_NOTE",
    "HTTP_CLASS_NOTE",
    "OTHER_STAT_NOTE",
    "PANDAS_MOMENT_NOTE",
    "STD_NOTE",
    "SUM_SHARE_NOTE",
    "UNPACKED_FIX",
    "UNPACKED_NOTE",
    "UNSEEDED_NOTE",
    "constant_not_in_denominator",
    "http_class",
    "name_tokens",
    "node_name",
    "quoted",
    "other_statistic",
    "other_std",
    "pandas_moments",
    "pearson_kurtosis",
    "sum_share",
    "unpacked_fixed",
    "unpacked_test",
    "unseeded",
]


def name_tokens(name: str) -> list[str]:
    """A name's words: ``isNormal`` and ``is_normal`` are ['is', 'normal']."""
    return [t.lower() for t in re.split(r"[_\W]+|(?<=[a-z])(?=[A-Z])", name) if t]


def all_nodes(code: str) -> list[ast.AST]:
    """Every node of ``code``'s syntax tree; none when it does not parse."""
    try:
        return list(ast.walk(ast.parse(code)))
    except SyntaxError:
        return []


def quoted(code: str, node: ast.AST) -> str:
    """The first line of ``node`` as ``code`` writes it (at most 100 characters), for a note that quotes it."""
    return (ast.get_source_segment(code, node) or ast.unparse(node)).splitlines()[0][:100]


def node_name(node: ast.AST) -> str:
    """What a name or attribute node is called (``stats.skew`` is 'skew'); '' for anything else."""
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        return node.attr
    return ""


MAX_FIX_LINES = 40  # the longest code a note offers back with its lines fixed: past that it quotes them


def rewritten(code: str, spans: list[tuple[ast.AST, str]]) -> str | None:
    """``code`` with each node's text replaced by its span's text, or None when a node spans lines (the fixed code
    would have to move lines about) or there is nothing to replace. Spans are applied right to left, bottom up, so
    the offsets of the rest stay valid.

    >>> import ast
    >>> code = "a = x > 3; b = y > 3"
    >>> spans = [(n, ast.unparse(n).replace(">", ">=")) for n in ast.walk(ast.parse(code)) if isinstance(n, ast.Compare)]
    >>> rewritten(code, spans)
    'a = x >= 3; b = y >= 3'
    """
    if not spans or any(node.end_lineno != node.lineno for node, _ in spans):  # type: ignore[attr-defined]
        return None
    lines = code.splitlines()
    for node, text in sorted(spans, key=lambda s: (s[0].lineno, s[0].col_offset), reverse=True):  # type: ignore[attr-defined]
        row = lines[node.lineno - 1].encode()  # type: ignore[attr-defined]  # ast columns are UTF-8 byte offsets
        lines[node.lineno - 1] = (row[: node.col_offset] + text.encode() + row[node.end_col_offset :]).decode()  # type: ignore[attr-defined]
    return "\n".join(lines)


_POPULATION = re.compile(r"population (standard deviation|std|variance)|ddof\s*=\s*0", re.I)
# Python's statistics module: stdev and variance are the sample ones (a development task said so, then sent np.std)
_SAMPLE = re.compile(
    r"sample (standard deviation|std|variance)|ddof\s*=\s*1|statistics['\u2019]?\s+module|statistics\.(stdev|variance)\b",
    re.I,
)
_NEGATED_KIND = re.compile(
    r"\b(?:not|rather than|instead of)\s+(?:the\s+|a\s+)?(?:sample|population)\s+(?:standard deviation|std|variance)",
    re.I,
)
_NUMPY = frozenset({"np", "numpy"})
STD_NOTE = (
    "Not accepted yet: a standard deviation of the other kind than the task names:\n{lines}\n"
    "pandas' .std() and .var() divide by n - 1 (the sample one); np.std and np.var divide by n (the population "
    "one). Use the kind the task names and call final_answer again."
)


def other_std(task: str, code: str) -> list[str]:
    r"""The lines of ``code`` that compute the other standard deviation (or variance) than the one ``task`` names,
    each as ``line N: `source` is the sample/population one``; empty when the task names neither or both.

    >>> other_std("Report the population standard deviation of Fare.", "sd = df['Fare'].std()")
    ["line 1: `df['Fare'].std()` is the sample standard deviation (ddof=1); the task asks for the population one: .std(ddof=0)"]
    >>> other_std("the population standard deviation", "sd = df['Fare'].std(ddof=0)\nv = np.std(df.Fare)")
    []
    >>> other_std("Use the sample standard deviation.", "sd = np.std(df['Fare'])")[0][-51:]
    'the task asks for the sample one: np.std(x, ddof=1)'
    >>> other_std("standard deviation", "sd = df.x.std()")
    []
    >>> other_std("the population standard deviation formula, not the sample standard deviation", "s = x.std()")[0][-32:]
    'the population one: .std(ddof=0)'
    >>> other_std("with the functions of Python's 'statistics' module", "sd = np.std(x)")[0][-51:]
    'the task asks for the sample one: np.std(x, ddof=1)'
    """
    task = _NEGATED_KIND.sub("", task)  # "the population formula, not the sample standard deviation formula"
    population, sample = bool(_POPULATION.search(task)), bool(_SAMPLE.search(task))
    if population == sample or not re.search(r"\b(std|var)\(", code):
        return []
    out = []
    for node in sorted((n for n in all_nodes(code) if isinstance(n, ast.Call)), key=lambda n: (n.lineno, n.col_offset)):
        func = node.func
        if not (isinstance(func, ast.Attribute) and func.attr in ("std", "var")):
            continue
        ddof = next((k.value for k in node.keywords if k.arg == "ddof"), None)
        if ddof is not None and not isinstance(ddof, ast.Constant):
            continue  # a ddof the code computes: its own business
        numpy = isinstance(func.value, ast.Name) and func.value.id in _NUMPY
        divisor = ddof.value if ddof is not None else (0 if numpy else 1)  # type: ignore[union-attr]
        text = quoted(code, node)
        what = "standard deviation" if func.attr == "std" else "variance"
        if population and divisor == 1:
            fix = f"np.{func.attr}(x)" if numpy else f".{func.attr}(ddof=0)"
            out.append(f"line {node.lineno}: `{text}` is the sample {what} (ddof=1); the task asks for "
                       f"the population one: {fix}")  # fmt: skip
        elif sample and divisor == 0:
            fix = f"np.{func.attr}(x, ddof=1)" if numpy else f".{func.attr}()"
            out.append(f"line {node.lineno}: `{text}` is the population {what} (ddof=0); the task asks "
                       f"for the sample one: {fix}")  # fmt: skip
    return out


_STAT_WORDS = {
    "skew": ("skew", "skewness"), "kurtosis": ("kurt", "kurtosis"), "mean": ("mean", "average", "avg"),
    "median": ("median",), "std": ("std", "stdev", "stddev", "sd"), "var": ("var", "variance"),
}  # fmt: skip
_STAT_CALLS = {
    "skew": "skew", "kurtosis": "kurtosis", "kurt": "kurtosis", "mean": "mean", "nanmean": "mean",
    "average": "mean", "median": "median", "nanmedian": "median", "std": "std", "nanstd": "std", "stdev": "std",
    "pstdev": "std", "var": "var", "nanvar": "var", "variance": "var", "pvariance": "var", "corr": "correlation",
    "corrcoef": "correlation",
    # the extremes: "rolling_avg = visits.rolling(7).max()" (a development task) is no average
    "max": "max", "nanmax": "max", "amax": "max", "min": "min", "nanmin": "min", "amin": "min",
}  # fmt: skip
OTHER_STAT_NOTE = (
    "Not accepted yet: a value named for one statistic is computed by another:\n{lines}\n"
    "Compute each value with the function its name (and the task) says, and call final_answer again."
)


def _named_stat(name: str) -> str | None:
    """The one statistic a name says (None for none or several: ``mean_std`` is a std of means)."""
    if _says_p(name):
        return "p-value"
    named = {stat for t in name_tokens(name) for stat, words in _STAT_WORDS.items() if t in words}
    return named.pop() if len(named) == 1 else None


def _computed_stats(node: ast.AST) -> set[str]:
    """The statistics the calls in ``node`` compute; a square root (or ``** 0.5``) makes a variance a std."""
    stats = {
        _STAT_CALLS[node_name(n.func)]
        for n in ast.walk(node)
        if isinstance(n, ast.Call) and node_name(n.func) in _STAT_CALLS
    }
    powers = any(isinstance(n, ast.BinOp) and isinstance(n.op, ast.Pow) for n in ast.walk(node))
    rooted = powers or any(isinstance(n, ast.Call) and node_name(n.func) in ("sqrt", "square") for n in ast.walk(node))
    if rooted and stats & {"std", "var"}:
        stats |= {"std", "var"}
    return stats


def other_statistic(code: str) -> list[str]:
    """The lines of ``code`` that give a name saying one statistic (skewness, kurtosis, mean, median, std, variance)
    a value that only other statistics compute, as ``line N: `name = source` computes kurtosis, not skew``.

    >>> other_statistic("skewness_value = round(kurtosis(df['x'], fisher=True), 2)")
    ["line 1: `skewness_value = round(kurtosis(df['x'], fisher=True), 2)` computes kurtosis, not skew"]
    >>> other_statistic("median_age = df.age.mean()\\nfinal_answer({'mean_age': df.age.median()})")[1]
    "line 2: `'mean_age': df.age.median()` computes median, not mean"
    >>> other_statistic("sd = np.sqrt(df.x.var())\\nmean_std = df.groupby('g').x.std().mean()\\nn_mean = len(df)")
    []
    >>> other_statistic("r, p_value = df.a.corr(df.b), df.a.corr(df.b, method='pearson')")[0][-33:]
    'computes correlation, not p-value'
    >>> other_statistic("rolling_avg = t['visits'].rolling(window=7).max()")[0][-22:]
    'computes max, not mean'
    >>> other_statistic("peak_avg = t['visits'].rolling(7).mean().max()\\nmax_wait = df.wait.max()")
    []
    """
    words = ("skew", "kurt", "mean", "median", "std", "var", "average", "avg", "sd", "corr")
    if not any(word in code for word in words):
        return []
    pairs: list[tuple[str, ast.AST, ast.AST]] = []  # (name, value, where)
    for node in all_nodes(code):
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
            pairs.append((node.targets[0].id, node.value, node))
        elif isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Tuple):
            names, values = node.targets[0].elts, node.value
            if isinstance(values, ast.Tuple) and len(values.elts) == len(names):  # r, p = a.corr(b), a.corr(b)
                pairs += [(t.id, v, node) for t, v in zip(names, values.elts, strict=True) if isinstance(t, ast.Name)]
        elif isinstance(node, ast.Dict):
            pairs += [
                (k.value, v, v) for k, v in zip(node.keys, node.values, strict=True)
                if isinstance(k, ast.Constant) and isinstance(k.value, str) and v is not None
            ]  # fmt: skip
    out: dict[int, str] = {}
    for name, value, where in pairs:
        said, computed = _named_stat(name), _computed_stats(value)
        if said is None or not computed or said in computed:
            continue
        if said == "p-value" and "correlation" not in computed:
            continue  # a share of permuted statistics (np.mean(perm >= obs)) is a p-value
        text = ast.get_source_segment(code, where) or ast.unparse(where)
        if where is value:
            text = f"{name!r}: {text}"
        out.setdefault(
            where.lineno,
            f"line {where.lineno}: `{text.splitlines()[0][:120]}` computes {', '.join(sorted(computed))}, not {said}",
        )
    return [out[k] for k in sorted(out)]


UNSEEDED_NOTE = (
    "Not accepted yet: the task fixes the random state, and the code leaves it out of a step that draws at "
    "random:\n{lines}\nPass random_state to every such step (the split, the model, the clustering) and call "
    "final_answer again."
)
# sklearn steps whose result depends on random_state (a tree breaks ties between features at random)
_DRAWS = frozenset({
    "train_test_split", "DecisionTreeRegressor", "DecisionTreeClassifier", "RandomForestRegressor",
    "RandomForestClassifier", "ExtraTreesRegressor", "ExtraTreesClassifier", "GradientBoostingRegressor",
    "GradientBoostingClassifier", "HistGradientBoostingRegressor", "HistGradientBoostingClassifier",
    "AdaBoostRegressor", "AdaBoostClassifier", "KMeans", "MiniBatchKMeans", "MLPRegressor", "MLPClassifier",
    "SGDRegressor", "SGDClassifier", "IsolationForest", "KFold", "StratifiedKFold", "ShuffleSplit", "TSNE",
})  # fmt: skip
_SEED = re.compile(r"\brandom[_ ]?(?:state|seed)\D{0,24}?(\d+)|\bseed\D{0,12}?(\d+)", re.I)


def unseeded(task: str, code: str) -> list[str]:
    """The calls of ``code`` that draw at random without the random state ``task`` fixes (a development task: "Set the
    random_state to 42", ``DecisionTreeRegressor(max_depth=5)``: another tree, another MAE).

    >>> unseeded("Use random_state 42 for the split.", "m = DecisionTreeRegressor(max_depth=5).fit(X, y)")
    ['line 1: `DecisionTreeRegressor(max_depth=5)` has no random_state: DecisionTreeRegressor(max_depth=5, random_state=42)']
    >>> unseeded("Use a random seed of 42.", "a, b = train_test_split(X, random_state=42)"), unseeded("", "KMeans(3)")
    ([], [])
    """
    m = _SEED.search(task)
    if m is None:
        return []
    seed = m.group(1) or m.group(2)
    out = []
    for node in all_nodes(code):
        if not (isinstance(node, ast.Call) and node_name(node.func) in _DRAWS):
            continue
        if any(k.arg in ("random_state", None) for k in node.keywords):  # given, or maybe in **kwargs
            continue
        fixed = ast.unparse(
            ast.Call(node.func, node.args, [*node.keywords, ast.keyword("random_state", ast.Constant(int(seed)))])
        )
        out.append(f"line {node.lineno}: `{quoted(code, node)}` has no random_state: {fixed}")
    return sorted(out, key=lambda line: int(line.split()[1].rstrip(":")))


UNPACKED_NOTE = (
    "Not accepted yet: a test's result is unpacked in the wrong order:\n{lines}\n"
    "scipy's tests return the statistic first and the p-value second: stat, p_value = shapiro(x) (or name them: "
    "r = shapiro(x); r.statistic, r.pvalue). Fix it and call final_answer again."
)
# scipy.stats tests that return (statistic, pvalue)
_TESTS = frozenset({
    "shapiro", "pearsonr", "spearmanr", "kendalltau", "pointbiserialr", "ttest_ind", "ttest_rel", "ttest_1samp",
    "normaltest", "kstest", "ks_2samp", "mannwhitneyu", "wilcoxon", "levene", "bartlett", "f_oneway", "kruskal",
    "jarque_bera", "chisquare", "skewtest", "kurtosistest", "fligner", "ranksums", "chi2_contingency",
})  # fmt: skip


def _says_p(name: str) -> bool:
    tokens = name_tokens(name)
    return "pvalue" in tokens or "pval" in tokens or tokens[-2:] == ["p", "value"] or tokens == ["p"]


def unpacked_test(code: str) -> list[str]:
    """The lines of ``code`` that unpack a scipy test's (statistic, p-value) into names the other way round
    (a development task: ``shapiro_p_value, distribution_type = shapiro(x)`` sent Shapiro's W as the p-value).

    >>> unpacked_test("shapiro_p_value, distribution_type = shapiro(df.humidity)")
    ['line 1: `shapiro_p_value, distribution_type = shapiro(df.humidity)` gives shapiro_p_value the statistic, not the p-value']
    >>> unpacked_test("stat, p_value = stats.shapiro(x)\\nr, p = pearsonr(a, b)")
    []
    """
    return [
        f"line {node.lineno}: `{quoted(code, node)}` gives {names[0]} the statistic, not the p-value"
        for node, names in _backwards_unpacks(code)
    ]


def _backwards_unpacks(code: str) -> list[tuple[ast.Assign, list[str]]]:
    """The assignments of ``code`` that unpack a scipy test into names p-value first, with those names."""
    out = []
    for node in all_nodes(code):
        if not (isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Tuple)):
            continue
        names = [t.id if isinstance(t, ast.Name) else "" for t in node.targets[0].elts]
        if len(names) < 2 or not isinstance(node.value, ast.Call) or node_name(node.value.func) not in _TESTS:
            continue
        if _says_p(names[0]) and not _says_p(names[1]):
            out.append((node, names))
    return out


UNPACKED_FIX = "Your code with each test's result unpacked in its order (run it):\n```python\n{code}\n```"


def unpacked_fixed(code: str) -> str | None:
    """``code`` with the first two names of each ``unpacked_test`` line swapped, or None when there is none or one
    spans lines (a development task: told the order, the 1.5B wrote ``p_value, stat = shapiro(x)``).

    >>> print(unpacked_fixed("p_value, stat = shapiro(x)\\nprint(p_value)"))
    stat, p_value = shapiro(x)
    print(p_value)
    """
    unpacks = _backwards_unpacks(code)
    if any(node.end_lineno != node.lineno for node, _ in unpacks):
        return None
    return rewritten(code, [(node.targets[0], ", ".join([names[1], names[0], *names[2:]])) for node, names in unpacks])


FISHER_NOTE = (
    "Not accepted yet: the task asks for Fisher's kurtosis (excess kurtosis, 0 for a normal distribution):\n{lines}\n"
    "scipy.stats.kurtosis(x) is Fisher's by default (fisher=True), as is pandas' .kurt(); fisher=False is "
    "Pearson's (3 for a normal distribution). Fix it and call final_answer again."
)


def pearson_kurtosis(task: str, code: str) -> list[str]:
    """The kurtosis calls of ``code`` with ``fisher=False`` when ``task`` asks for Fisher's (a development task).

    >>> pearson_kurtosis("using Fisher's method", "k = kurtosis(df.x, fisher=False)")
    ["line 1: `kurtosis(df.x, fisher=False)` is Pearson's kurtosis; the task asks for Fisher's: kurtosis(x)"]
    >>> pearson_kurtosis("kurtosis", "k = kurtosis(df.x, fisher=False)")
    []
    """
    if not re.search(r"\bfisher", task, re.I) or re.search(r"\bpearson'?s? kurtosis", task, re.I):
        return []
    out = []
    for node in all_nodes(code):
        if isinstance(node, ast.Call) and node_name(node.func) == "kurtosis":
            fisher = next((k.value for k in node.keywords if k.arg == "fisher"), None)
            if isinstance(fisher, ast.Constant) and fisher.value is False:
                text = quoted(code, node)
                out.append(
                    f"line {node.lineno}: `{text}` is Pearson's kurtosis; the task asks for Fisher's: kurtosis(x)"
                )
    return out


DENOMINATOR_NOTE = (
    "Not accepted yet: the task adds a constant to the denominator, and the code adds it elsewhere:\n{lines}\n"
    "Write numerator / (denominator + constant) and call final_answer again."
)
_TO_DENOMINATOR = re.compile(
    r"(?:add|adding)\s+(?:a\s+small\s+constant\s*)?\(?\s*([0-9.eE+-]+)\s*\)?\s+to\s+the\s+denominator", re.I
)


def constant_not_in_denominator(task: str, code: str) -> list[str]:
    """The divisions of ``code`` that add the constant the task puts in the denominator to the numerator instead
    (a development task: "add a small constant (1e-10) to the denominator"; the model wrote ``(a + 1e-10) / b``).

    >>> constant_not_in_denominator("Add a small constant (1e-10) to the denominator", "r = (df.a + 1e-10) / df.b")
    ['line 1: `(df.a + 1e-10) / df.b` adds 1e-10 to the numerator: (df.a) / (df.b + 1e-10)']
    >>> constant_not_in_denominator("Add 1e-10 to the denominator", "r = df.a / (df.b + 1e-10)")
    []
    """
    m = _TO_DENOMINATOR.search(task)
    if m is None:
        return []
    try:
        value = float(m.group(1))
    except ValueError:
        return []

    def holds(node: ast.AST) -> bool:
        return any(
            isinstance(n, ast.Constant) and type(n.value) in (int, float) and n.value == value for n in ast.walk(node)
        )

    out = []
    for node in all_nodes(code):
        if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Div) and holds(node.left) and not holds(node.right):
            top = node.left
            if isinstance(top, ast.BinOp) and isinstance(top.op, ast.Add) and holds(top.right) and not holds(top.left):
                top = top.left
            fixed = f"({ast.unparse(top)}) / ({ast.unparse(node.right)} + {m.group(1)})"
            text = quoted(code, node)
            out.append(f"line {node.lineno}: `{text}` adds {m.group(1)} to the numerator: {fixed}")
    return out


PANDAS_MOMENT_NOTE = (
    "Not accepted yet: the task asks for scipy's skewness/kurtosis, and the code uses pandas':\n{lines}\n"
    "pandas' .skew() and .kurt() are the bias-corrected estimators; scipy.stats.skew(x) and scipy.stats.kurtosis(x) "
    "(bias=True by default) give other values. Use scipy's, as the task says, and call final_answer again."
)
_SCIPY_MOMENTS = re.compile(r"scipy\b.{0,200}\b(skew|kurtosis)|\b(skew|kurtosis).{0,200}\bscipy", re.I | re.S)
_PANDAS_MOMENTS = {
    "skew": "scipy.stats.skew(x)",
    "kurt": "scipy.stats.kurtosis(x)",
    "kurtosis": "scipy.stats.kurtosis(x)",
}


def pandas_moments(task: str, code: str) -> list[str]:
    """The pandas ``.skew()`` / ``.kurt()`` calls of ``code`` when ``task`` asks for scipy's (a development task: "For
    skewness and kurtosis use Python's scipy library"; pandas' 0.1546 was sent for scipy's 0.1520).

    >>> pandas_moments("For skewness use Python's scipy library.", "s = df['trips'].skew()\\nk = stats.kurtosis(x)")
    ["line 1: `df['trips'].skew()` is pandas' bias-corrected skewness; the task asks for scipy's: scipy.stats.skew(x)"]
    >>> pandas_moments("What is the skewness?", "s = df['trips'].skew()")
    []
    """
    if not _SCIPY_MOMENTS.search(task):
        return []
    out = []
    for node in all_nodes(code):
        func = node.func if isinstance(node, ast.Call) else None
        if not (isinstance(func, ast.Attribute) and func.attr in _PANDAS_MOMENTS) or node.args:  # type: ignore[union-attr]
            continue
        owner = func.value
        if (isinstance(owner, ast.Name) and owner.id in ("stats", "st", "ss", "scipy")) or node_name(owner) == "stats":
            continue  # stats.skew(x) is scipy's
        what = "skewness" if func.attr == "skew" else "kurtosis"
        text = quoted(code, node)
        out.append(
            f"line {node.lineno}: `{text}` is pandas' bias-corrected {what}; the task asks for scipy's: "
            f"{_PANDAS_MOMENTS[func.attr]}"
        )
    return out


SUM_SHARE_NOTE = (
    "Not accepted yet: the task asks for a share of rows (how many of them), and the code divides sums of a "
    "column (how much of it):\n{lines}\nA share of orders over $150 is len(orders[orders['amount'] > 150]) / "
    "len(orders); a share of the amount would be the sums. Count the rows, unless the task truly asks for the "
    "column's total, and call final_answer again."
)
# "what share / fraction / percentage / proportion of (all / the / total) <plural noun>"
_COUNT_SHARE = re.compile(
    r"\b(?:share|fraction|proportion|percentage|percent|ratio|rate)\s+of\s+(?:(?:all|the|total)\s+)*([a-z]+s)\b", re.I
)
_NOT_COUNTS = frozenset({"sales", "revenues", "earnings", "profits", "costs", "payments", "hours", "minutes"})


def _summed_column(node: ast.AST, names: dict[str, ast.AST]) -> tuple[str, ast.AST] | None:
    """``frame[col].sum()`` (directly, rounded, or through a variable) -> (col, frame); None for anything else."""
    for _ in range(4):  # a name, or a wrapper, stands for what it holds
        if isinstance(node, ast.Name) and node.id in names:
            node = names[node.id]
        elif isinstance(node, ast.Call) and node_name(node.func) in ("round", "float") and node.args:
            node = node.args[0]
        else:
            break
    if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "sum"):
        return None
    if node.args or node.keywords:
        return None
    column = node.func.value
    if isinstance(column, ast.Subscript) and isinstance(column.slice, ast.Constant):
        if isinstance(column.slice.value, str):
            return column.slice.value, column.value
    if isinstance(column, ast.Attribute) and isinstance(column.value, ast.Name | ast.Subscript | ast.Call):
        return column.attr, column.value
    return None


def sum_share(task: str, code: str) -> list[str]:
    """The divisions of ``code`` that take a share of rows the task counts as a ratio of one column's sums
    (a development task: the share of orders over a threshold answered with the share of the amount).

    >>> sum_share("What share of bookings cost more than $200?",
    ...           "big = bookings[bookings['price'] > 200]['price'].sum()\\nshare = big / bookings['price'].sum()")
    ["line 2: `big / bookings['price'].sum()` is a share of 'price': len(bookings[bookings['price'] > 200]) / len(bookings)"]
    >>> sum_share("What share of revenue comes from bookings over $200?", "s = a['price'].sum() / b['price'].sum()")
    []
    >>> sum_share("What share of bookings cost more than $200?", "s = len(bookings[bookings.price > 200]) / len(bookings)")
    []
    """
    m = _COUNT_SHARE.search(task)
    if m is None or m.group(1).lower() in _NOT_COUNTS:
        return []
    noun = m.group(1).lower()
    nodes = all_nodes(code)
    names = {
        n.targets[0].id: n.value for n in nodes if isinstance(n, ast.Assign) and isinstance(n.targets[0], ast.Name)
    }
    out = []
    for node in nodes:
        if not (isinstance(node, ast.BinOp) and isinstance(node.op, ast.Div)):
            continue
        top, bottom = _summed_column(node.left, names), _summed_column(node.right, names)
        if top is None or bottom is None or top[0] != bottom[0]:
            continue
        if noun.rstrip("s") in name_tokens(top[0]) or noun in name_tokens(top[0]):  # "share of sales": a sum
            continue
        fixed = f"len({ast.unparse(top[1])}) / len({ast.unparse(bottom[1])})"
        text = quoted(code, node)
        out.append(f"line {node.lineno}: `{text}` is a share of {top[0]!r}: {fixed}")
    return out


HTTP_CLASS_NOTE = (
    "Not accepted yet: the code selects other HTTP statuses than the class of errors the task names:\n"
    "{lines}\nServer errors are the 5xx statuses (status >= 500), client errors the 4xx ones (400 <= status < 500). "
    "Select the class the task names and call final_answer again."
)
_HTTP_ASKED = re.compile(r"\b(server|client)[- ](?:side )?errors?\b", re.I)


def http_class(task: str, code: str) -> list[str]:
    """The comparisons of ``code`` with an HTTP status of the other class than the errors ``task`` names (a
    development task: a share of server errors taken with ``status == 404``).

    >>> http_class("What percentage of calls ended in a server error?", "bad = df[df['status'] == 404]")
    ["line 1: `df['status'] == 404` selects 404, a client error (the task asks about server errors)"]
    >>> http_class("Share of server errors?", "bad = df[df.status >= 500]")
    []

    One status of the class for the whole class (development runs: "a server error" as ``status == 503``, then as
    ``== 500``, where the log held 500, 502 and 503):

    >>> http_class("What fraction of requests failed with a server error?", "n = (df['status'] == 503).sum()")
    ["line 1: `df['status'] == 503` selects only 503 of the server errors (the task asks about all of them: 5xx)"]
    >>> http_class("How many requests got a 503 server error?", "n = (df['status'] == 503).sum()")
    []
    """
    m = _HTTP_ASKED.search(task)
    if m is None:
        return []
    asked = m.group(1).lower()
    other = range(400, 500) if asked == "server" else range(500, 600)
    own_class = range(500, 600) if asked == "server" else range(400, 500)
    out = []
    for node in all_nodes(code):
        if not isinstance(node, ast.Compare):
            continue
        values = [c.value for c in [node.left, *node.comparators] if isinstance(c, ast.Constant)]
        hits = [v for v in values if type(v) is int and v in other]
        if hits and not any(type(v) is int and v in (500, 600) for v in values):
            kind = "a client error" if asked == "server" else "a server error"
            text = quoted(code, node)
            out.append(f"line {node.lineno}: `{text}` selects {hits[0]}, {kind} (the task asks about {asked} errors)")
            continue
        own = [v for v in values if type(v) is int and v in own_class]
        one = len(node.ops) == 1 and isinstance(node.ops[0], ast.Eq) and len(own) == 1
        if one and not re.search(rf"\b{own[0]}\b", task):  # "a 503 error" names that one status
            text = quoted(code, node)
            cls = "5xx" if asked == "server" else "4xx"
            out.append(
                f"line {node.lineno}: `{text}` selects only {own[0]} of the {asked} errors (the task asks about all of "
                f"them: {cls})"
            )
    return out
