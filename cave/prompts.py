"""What the model reads: the system prompt, code extraction, observations (the guard on code is cave.review.guard).

The system prompt is rendered from ``runtime.describe()`` every step (the
"dual stream": state lives in the runtime, the prompt carries a description
of it, not its contents), within a token budget. Observations are stdout, the
trailing value and errors, truncated head + tail so the model always sees
how the output starts and how it ends.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping

from cave.review.error_hints import error_help, error_hint
from cave.review.guard import guard_code
from cave.runtimes.base import Execution, VariableInfo

__all__ = [
    "CONTINUE_PROMPT",
    "CountFn",
    "INSTRUCTIONS",
    "LOOP_NAMES",
    "MAX_STEPS_PROMPT",
    "REPEAT_NOTE",
    "REPEAT_CALL_NOTE",
    "REPEAT_OK_NOTE",
    "REPEAT_NOTED_NOTE",
    "NOTED_CELL",
    "PROSE_CALL_RUN",
    "TYPED_DISPLAY_NOTE",
    "MISSING_FILE_NOTE",
    "MISSING_FILTER_NOTE",
    "MISSING_KEY_NOTE",
    "TASK_COLUMN_NOTE",
    "UNTRANSFERABLE_ANSWER",
    "SUMMARY_PROMPT",
    "error_hint",
    "estimate_tokens",
    "extract_code",
    "format_execution",
    "guard_code",
    "observation_message",
    "render_system_prompt",
    "state_lines",
    "state_note",
    "trim_traceback",
    "truncate_middle",
    "unclosed_code",
]

# Names the agent loop injects for itself; they are described in the instructions, not listed as state.
LOOP_NAMES = frozenset({"final_answer", "_final_answer", "FinalAnswer"})

INSTRUCTIONS = """\
You are an expert Python data analyst working in a persistent Python session.
Solve the task by writing Python code; you will see what it prints.

How to work:
- Reply with one short sentence of reasoning, then a ```python code block.
- The variables and functions listed below already exist in the session: use them directly by name.
  Do not re-create them and do not read files unless the task says so.
- Variables you create are kept between steps.
- print() what you need to see: only printed output and the last expression's value are shown to you.
- When you have the result, call final_answer(result) in a code block. Pass the object itself
  (a DataFrame, a number, a list), not a sentence describing it.\
"""

CountFn = Callable[[str], int]


def estimate_tokens(text: str) -> int:
    """The 4-characters-per-token estimate (used when no tokenizer is at hand).

    >>> estimate_tokens("abcdefgh")
    2
    """
    return max(1, len(text) // 4)


# -- the system prompt ---------------------------------------------------------------------------
def render_system_prompt(
    variables: Iterable[VariableInfo],
    *,
    budget_tokens: int = 1500,
    count_tokens: CountFn = estimate_tokens,
    instructions: str = INSTRUCTIONS,
    extra_sections: Iterable[str] = (),
) -> str:
    """The system prompt: instructions, then functions, types and variables, within ``budget_tokens``.

    Sections shrink in steps until the prompt fits: full previews, then one-line previews,
    then names and types only, then a count of what was left out (never silently).

    >>> v = [VariableInfo("sales", "pandas.DataFrame", preview="3 rows x 2 columns: a (int64), b (str)", injected=True)]
    >>> p = render_system_prompt(v, instructions="Solve it.")
    >>> "- sales: pandas.DataFrame - 3 rows x 2 columns" in p
    True
    """
    infos = [v for v in variables if v.name not in LOOP_NAMES]
    head = "\n\n".join(s for s in [instructions, *extra_sections] if s)
    body = ""
    for detail in ("full", "line", "name"):
        body = _state_sections(infos, detail)
        prompt = f"{head}\n\n{body}" if body else head
        if count_tokens(prompt) <= budget_tokens:
            return prompt
    return _fit_lines(head, body, budget_tokens, count_tokens)


def state_lines(variables: Iterable[VariableInfo]) -> dict[str, str]:
    """One line per variable (name -> description), what the step-to-step state note compares."""
    return {v.name: _describe_line(v, "line") for v in variables if v.name not in LOOP_NAMES}


def state_note(
    before: Mapping[str, str],
    after: Mapping[str, str],
    *,
    budget_tokens: int = 400,
    count_tokens: CountFn = estimate_tokens,
) -> str:
    r"""What changed in the session since the model last saw it: new or changed variables, then removed ones.

    Appended to an observation instead of re-rendering the system prompt, so the prompt only ever grows at its
    end and the model's KV cache of everything before stays valid.

    >>> state_note({"a": "- a: int - 1"}, {"a": "- a: int - 2", "b": "- b: str"})
    'Variables now in the session (new or changed):\n- a: int - 2\n- b: str'
    >>> state_note({"a": "- a: int - 1"}, {})
    'Variables now in the session (new or changed):\n(removed: a)'
    >>> state_note({"a": "x"}, {"a": "x"})
    ''
    """
    changed = [line for name, line in after.items() if before.get(name) != line]
    removed = [name for name in before if name not in after]
    if not changed and not removed:
        return ""
    tail = [f"(removed: {', '.join(removed)})"] if removed else []
    lines = [STATE_HEADER, *changed, *tail]
    text = "\n".join(lines)
    while changed and count_tokens(text) > budget_tokens:  # the newest names are kept; a count says what was cut
        changed.pop(0)
        text = "\n".join([STATE_HEADER, *changed, "(and more; print(dir()) lists them all)", *tail])
    return text


def _state_sections(infos: list[VariableInfo], detail: str) -> str:
    functions = [v for v in infos if v.kind == "function"]
    types = [v for v in infos if v.kind == "type"]
    injected = [v for v in infos if v.kind in ("variable", "module") and v.injected]
    created = [v for v in infos if v.kind == "variable" and not v.injected]
    modules = [v for v in infos if v.kind == "module" and not v.injected]
    parts = []
    for title, items in (
        ("Functions you can call", functions),
        ("Types you can use", types),
        ("Variables given to you", injected),
        ("Variables you created", created),
    ):
        if items:
            parts.append(f"## {title}\n" + "\n".join(_describe_line(v, detail) for v in items))
    if modules:  # imports take one line, not one per module
        parts.append("## Modules you imported\n" + ", ".join(_module_label(v) for v in modules))
    return "\n\n".join(parts)


def _module_label(v: VariableInfo) -> str:
    # preview looks like "module pandas 3.1.0"
    words = v.preview.split()
    real = words[1] if len(words) > 1 and words[0] == "module" else v.name
    return v.name if real == v.name else f"{v.name} ({real})"


def _describe_line(v: VariableInfo, detail: str) -> str:
    if v.kind == "function":
        # The preview of a function is its signature (+ doc); show it as a call.
        preview = v.preview or f"{v.name}(...)"
        text = preview if preview.startswith(v.name) else f"{v.name}: {preview}"
    else:
        text = f"{v.name}: {v.type}"
        if v.preview and detail != "name":
            text += f" - {v.preview}"
    if detail != "full":
        first = text.splitlines()[0] if text else ""
        # A function's signature is how to call it: never cut inside it (a variable's preview may be cut).
        limit = max(160, len(v.preview.split(")")[0]) + 40) if v.kind == "function" else 160
        text = first[: limit - 3] + "..." if len(first) > limit else first
    if v.description and detail != "name":
        text += "\n" + " ".join(v.description.split())
    return "- " + text.replace("\n", "\n  ")


def _fit_lines(head: str, body: str, budget: int, count_tokens: CountFn) -> str:
    """Keep whole lines of ``body`` while the prompt fits; say how many names were left out."""
    lines = body.splitlines()
    lo, hi = 0, len(lines)
    while lo < hi:  # the most lines that fit, by bisection (each try counts the whole prompt once)
        mid = (lo + hi + 1) // 2
        if count_tokens(_with_marker(head, lines, mid)) <= budget:
            lo = mid
        else:
            hi = mid - 1
    return _with_marker(head, lines, lo)


def _with_marker(head: str, lines: list[str], n: int) -> str:
    left = sum(1 for x in lines[n:] if x.startswith("- "))
    marker = f"... ({left} more names not shown; print(dir()) lists them all)"
    return f"{head}\n\n" + "\n".join([*lines[:n], marker])


# -- code extraction -----------------------------------------------------------------------------
_FENCE = re.compile(r"^[ \t]*```[ \t]*(?P<lang>[\w+-]*)[^\n]*\n(?P<body>.*?)^[ \t]*```[ \t]*$", re.S | re.M)
_CODE_LANGS = {"python", "py", "python3", "ipython", ""}


def extract_code(text: str) -> list[str]:
    """The code blocks of a reply, in order: ```python (or unlabeled) fences, plus a trailing unclosed one; a
    reply without fences that is Python all through is one block.

    >>> extract_code("Let me see.\\n```python\\nx = 1\\n```\\nand\\n```py\\nprint(x)\\n```")
    ['x = 1', 'print(x)']
    >>> extract_code("no code here"), extract_code("final_answer(best_month)")
    ([], ['final_answer(best_month)'])
    >>> extract_code("python\\nfinal_answer(best_month)")  # backticks forgotten, the language tag kept
    ['final_answer(best_month)']
    >>> extract_code("```python\\nx = [1,\\n")  # cut off by the token limit
    ['x = [1,']

    An unlabeled block that is not Python next to one that is, is the output the model expects, not code:

    >>> extract_code("```python\\nprint(f'@m[{m}]')\\n```\\nThe output will be:\\n```\\n@m[0.07]\\n```")
    ["print(f'@m[{m}]')"]
    """
    blocks: list[tuple[str, bool]] = []  # (code, labeled)
    end = 0
    for m in _FENCE.finditer(text):
        end = m.end()
        if m.group("lang").lower() in _CODE_LANGS:
            code = m.group("body").strip("\n")
            if code.strip():
                blocks.append((_dedent(code), bool(m.group("lang"))))
    tail = unclosed_code(text[end:])
    if tail is not None and tail.strip():
        blocks.append((_dedent(tail.strip("\n")), True))
    if len(blocks) > 1:
        kept = [(code, labeled) for code, labeled in blocks if labeled or code.lstrip()[:1] in "%!" or _parses(code)]
        blocks = kept or blocks
    if not blocks and "```" not in text:
        head, _, rest = text.strip().partition("\n")
        if head.strip().lower() in _CODE_LANGS - {""} and rest.strip():
            text = rest  # the fence's language tag without its backticks: "python\nfinal_answer(x)"
        if _bare_code(text):
            return [text.strip()]
    return [code for code, _ in blocks]


def _parses(code: str) -> bool:
    import ast

    try:
        ast.parse(code)
    except SyntaxError:
        return False
    return True


def _bare_code(text: str) -> bool:
    """Whether a reply without fences is code all the same: the whole of it is Python that calls, assigns or
    imports something (a small model answers ``final_answer(best_month)`` on a line of its own), not prose.

    >>> _bare_code("final_answer(max_visits_month)"), _bare_code("x = df['a'].sum()\\nprint(x)")
    (True, True)
    >>> _bare_code("The answer is 42."), _bare_code("Yes"), _bare_code("42")
    (False, False, False)
    """
    import ast

    text = text.strip()
    if not text or len(text) > 2000:
        return False
    try:
        tree = ast.parse(text)
    except (SyntaxError, ValueError):
        return False
    actions = (ast.Call, ast.Assign, ast.AugAssign, ast.AnnAssign, ast.Import, ast.ImportFrom)
    return any(isinstance(node, actions) for node in ast.walk(tree))


def unclosed_code(text: str) -> str | None:
    """The code after an opening ```python fence that was never closed, else None.

    >>> unclosed_code("ok\\n```python\\nprint(1)")
    'print(1)'
    >>> unclosed_code("```python\\nprint(1)\\n```") is None
    True
    """
    fences = list(re.finditer(r"^[ \t]*```[ \t]*([\w+-]*)[^\n]*$", text, re.M))
    if len(fences) % 2 == 0:
        return None
    last = fences[-1]
    if last.group(1).lower() not in _CODE_LANGS:
        return None
    return text[last.end() + 1 :]


def _dedent(code: str) -> str:
    import textwrap

    return textwrap.dedent(code)


# -- observations --------------------------------------------------------------------------------
def truncate_middle(text: str, limit: int) -> str:
    """Keep the head and the tail of ``text`` within ``limit`` characters, with a marker between.

    >>> truncate_middle("a" * 10 + "b" * 10, 12)
    'aaa\\n... [14 characters truncated] ...\\nbbb'
    >>> truncate_middle("short", 100)
    'short'
    """
    if len(text) <= limit:
        return text
    keep = max(limit - 40, limit // 2)
    head_n = keep // 2
    tail_n = keep - head_n
    head = text[:head_n]
    tail = text[-tail_n:] if tail_n else ""
    # Cut at line boundaries when a newline is close, so lines stay readable.
    nl = head.rfind("\n")
    if nl > head_n * 0.6:
        head = head[:nl]
    nl = tail.find("\n")
    if 0 <= nl < tail_n * 0.4:
        tail = tail[nl + 1 :]
    dropped = len(text) - len(head) - len(tail)
    return f"{head}\n... [{dropped} characters truncated] ...\n{tail}"


def trim_traceback(tb: str, max_frames: int = 3) -> str:
    """Keep the header, the last ``max_frames`` frames and the error line of a traceback.

    >>> tb = "Traceback (most recent call last):\\n" + "".join(
    ...     f'  File "<cell>", line {i}, in f{i}\\n    f{i+1}()\\n' for i in range(6)) + "ValueError: bad"
    >>> out = trim_traceback(tb, 2)
    >>> out.count('File "<cell>"'), "4 frames omitted" in out, out.endswith("ValueError: bad")
    (2, True, True)
    """
    lines = tb.rstrip("\n").splitlines()
    frame_starts = [i for i, line in enumerate(lines) if line.startswith('  File "')]
    if len(frame_starts) <= max_frames:
        return "\n".join(lines)
    first, keep_from = frame_starts[0], frame_starts[-max_frames]
    omitted = len(frame_starts) - max_frames
    return "\n".join(lines[:first] + [f"  ... ({omitted} frames omitted) ..."] + lines[keep_from:])


def format_execution(ex: Execution, *, limit: int = 4000, max_frames: int = 3, notes: Iterable[str] = ()) -> str:
    """One block's result as the model sees it: stdout, stderr, the trailing value, the error.

    >>> format_execution(Execution(stdout="hi\\n", result="42"))
    'hi\\nOut: 42'
    >>> format_execution(Execution())
    '(the code ran without errors and printed nothing)'
    """
    parts = []
    if ex.stdout:
        parts.append(ex.stdout.rstrip("\n"))
    if ex.stderr and ex.stderr.strip():
        parts.append("[stderr]\n" + ex.stderr.rstrip("\n"))
    if ex.result is not None:
        parts.append(f"Out: {ex.result}")
    body = truncate_middle("\n".join(parts), limit) if parts else ""
    tail = []
    if ex.timed_out:
        tail.append(
            f"TimeoutError: the code ran longer than the time limit and was stopped ({ex.recovery or 'interrupted'})."
        )
    elif ex.error is not None:
        # Errors get their own budget: the last frames and the message are what the model needs.
        tail.append(truncate_middle(trim_traceback(str(ex.error), max_frames), max(limit // 2, 400)))
        hint, fixed = error_help(ex.error.type, ex.error.message, str(ex.error))
        if fixed:  # the general hint's example is not the model's own line; a small model copies the line better
            hint = f"{hint}. Your line, rewritten: {fixed}" if hint else f"your line, rewritten: {fixed}"
        if hint:
            tail.append(f"Hint: {hint}")
    if ex.recovery in ("restarted", "crashed"):
        tail.append(
            f"(the runtime {ex.recovery} and was restored: injected objects are back, variables you created are gone)"
        )
    tail += [f"Note: {n}" for n in notes]
    if not body and not (ex.error or ex.timed_out):
        body = "(the code ran without errors and printed nothing)"
    return "\n".join(p for p in [body, *tail] if p)


def observation_message(formatted_blocks: list[str], skipped: int = 0) -> str:
    """The user message after a step: one section per code block that ran.

    >>> observation_message(["1"])
    'Observation:\\n1'
    >>> observation_message(["1", "2"], skipped=1)
    'Observation:\\n[block 1]\\n1\\n[block 2]\\n2\\n(1 later block not run because this one failed)'
    """
    if len(formatted_blocks) == 1 and not skipped:
        return "Observation:\n" + formatted_blocks[0]
    parts = [f"[block {i}]\n{text}" for i, text in enumerate(formatted_blocks, 1)]
    if skipped:
        parts.append(f"({skipped} later block{'s' if skipped > 1 else ''} not run because this one failed)")
    return "Observation:\n" + "\n".join(parts)


NEED_OBJECTS_NOTE = (
    "That reply had no code. This task checks the objects you leave in the runtime: write Python that builds "
    "them and call final_answer(result) in a ```python block."
)
CUT_NOTE = (
    "Your code block was cut off at the length limit ({max_tokens} tokens per reply) and was not run. "
    "The usual cause is data typed in by hand: the data is already in the session, so use the given variables by "
    "name and write short code (one step at a time)."
)
PROSE_AFTER_ERROR_NOTE = (
    "That reply had no code, and your last code failed, so it cannot be the answer yet. Fix the code (one small "
    "step) in a ```python block, and call final_answer(result) when you have the result."
)
PROSE_AFTER_HELD_NOTE = (
    "That reply had no code, and your last answer was not accepted yet (the note above says why), so the task is "
    "not finished. Reply with a ```python block: fix the answer and call final_answer(...) again, or confirm it "
    "as it is with final_answer(_final_answer)."
)
PROSE_NEEDS_CALL_NOTE = (
    "That reply had no code, but the task asks for the answer through final_answer(...), so prose cannot be it. "
    "Call final_answer in a ```python block, passing the variables that hold your results (not numbers copied "
    "from the output)."
)
PROSE_TO_VERIFY_NOTE = (
    "That reply had no code, and an answer in words cannot be checked. Call final_answer in a ```python block, "
    "passing the variable that holds your result (not a number or name copied from the output)."
)
PROSE_UNCHECKED_NOTE = (
    "That reply had no code: you have not looked at the data yet, so it cannot be the answer. Compute the answer "
    "with code from the variables given to you, then call final_answer(result) in a ```python block."
)
FOLDED_NOTE = "(An attempt here failed with {error}; its code is omitted so that the next one takes another approach.)"
PROSE_NAMED_CALL_NOTE = (
    "That reply had no code, so nothing ran: {names} {was} not called. {names} {is_} in this session and "
    "{runs} only from code: write the call in a ```python block, with the arguments the request gives. If none "
    "of the functions fits the request, say so again in plain text."
)
ANSWER_WITHOUT_CALLS_NOTE = (
    "Not accepted yet: this task is done by calling this session's functions, and none of them has been called "
    "({names}). If one of them does what the request asks, call it in a ```python block with the arguments the "
    "request gives, rather than working the result out yourself. If none of them fits the request, reply again "
    "saying so."
)
UNKNOWN_FUNCTION_NOTE = (
    "Note: `{name}` does not exist in this session (its functions are the ones listed in the system prompt). "
    "If none of those fits the request, do not call anything: reply in plain text saying so."
)
MISSING_OUTPUTS_NOTE = (
    "Not finished yet: the task asks you to store results in {names}, which {verb} not exist in the session. "
    "Assign {them} first, then call final_answer(...)."
)
LOOP_NOTE = "This is the same error as in your previous {n} steps. Stop repeating that approach.{line}{facts} {step}"
LOOP_SMALL_STEP = (
    "Take one small step: print what you need to know first (e.g. columns, dtypes, a few rows), then continue."
)
LOOP_FIXED_LINE = "The failing line with the real column name, to use instead:\n```python\n{fixed}\n```"
SCALAR_FIXED_LINE = (
    "The failing line without an index into one number (a test's statistic and p-value are single floats), to use "
    "instead:\n```python\n{fixed}\n```"
)
SHADOWED_COLUMN_LINE = (
    "`.{column}` is a DataFrame method, not the column {column!r}: a column named like a method is read with "
    "brackets. The failing line, to use instead:\n```python\n{fixed}\n```"
)
VALUE_AS_LABEL_LINE = (
    "{value!r} is a value of {frame}[{column!r}], not a row label of {frame}: the name you looked it up with already "
    "holds it (a label from idxmax() over a Series indexed by {column} is the {column} itself). The failing line, to "
    "use instead:\n```python\n{fixed}\n```"
)
ARRAY_FIXED_LINE = (
    "The failing line written for a NumPy array, to use instead:\n```python\nimport numpy as np\n{fixed}\n```"
)
MISSING_FILTER_NOTE = (
    "{table} has no {key!r} column to select {value!r} by, and none of its columns holds {value!r}: the table is all "
    "about the {value!r} the task names. Use its rows as they are:\n```python\n{fixed}\n```"
)
MISSING_FILE_NOTE = (
    "There is no such file here: the data was given to you already loaded, as {names}. Use it in place of the file{use}"
)
MISSING_KEY_NOTE = "The objects on the failing line really are: {facts}. Use the names they have."
TASK_COLUMN_NOTE = (
    '{key!r} is no column yet: it is one the task asks you to make ("{said}"). Create it first ({frame}[{key!r}] = '
    "... as the task defines it), then use it."
)
GAVE_UP_NOTE = (
    "final_answer({value}) is not an answer: your previous code failed ({error}), so nothing computed what the task "
    "asks. Fix that code (one small step, using the objects' real names) and call final_answer with the result."
)


def answer_without_calls_note(functions: list[str], shown: int = 6) -> str:
    """The note for an answer given before any of the session's functions was called (``expect_calls``).

    >>> answer_without_calls_note(["solve_quadratic"])[:95]
    "Not accepted yet: this task is done by calling this session's functions, and none of them has b"
    >>> "(`a`, `b`, `c`, and 2 more)" in answer_without_calls_note(["a", "b", "c", "d", "e"], shown=3)
    True
    """
    names = ", ".join(f"`{f}`" for f in functions[:shown])
    if len(functions) > shown:
        names += f", and {len(functions) - shown} more"
    return ANSWER_WITHOUT_CALLS_NOTE.format(names=names)


STATE_HEADER = "Variables now in the session (new or changed):"
REPEAT_NOTE = "You ran exactly the same code as in your previous step. Read the error above and change the code."
NOTED_CELL = "\nYour cell with the Note's line in place:\n```python\n{code}\n```"
REPEAT_NOTED_NOTE = (
    "You ran exactly the same code as in your previous step, and it got the same Note about what it computed. Read "
    "that Note and change the code as it says, then call final_answer."
)
PROSE_CALL_RUN = "(your reply calls final_answer({name}) outside the code block: it was run for you)"
TYPED_DISPLAY_NOTE = (
    "That cell only shows values you typed into it: it computes nothing, and typed values are no answer. Compute "
    "them from the data with code (fix the error or the NaN above first), then call final_answer with the variables "
    "that hold them."
)
REPEAT_OK_NOTE = (
    "You ran exactly the same code as in your previous step, and it printed the same. If that answers the task, "
    "call final_answer with the result; otherwise change the code."
)
# the call as a block to run: the 1.5B copies a ready block where it ignores "e.g. final_answer(x)" in a sentence
# (a development task: the same cell six times, "The final answer is 'Accra'." after each, max_steps)
REPEAT_CALL_NOTE = (
    "You ran exactly the same code as in your previous step, and it printed the same. If `{name}` holds the answer "
    "to the task, run:\n```python\nfinal_answer({name})\n```\nOtherwise change the code."
)
UNTRANSFERABLE_ANSWER = (
    "final_answer was NOT accepted: this runtime can hand back only plain data. Pass numbers, strings, lists, dicts, "
    "DataFrames or Series (e.g. list(...) of an Index, .tolist() of an array, str(...) of anything else)"
)
CONTINUE_PROMPT = (
    "Your reply was cut off by the length limit inside a code block. Continue exactly where it stopped: "
    "write only the rest of the code, do not repeat what you already wrote, and close the code block."
)
MAX_STEPS_PROMPT = (
    "You have used all your steps. Do not write code. In a few sentences, state the answer to the task "
    "as best you can from what you found, and what is still missing."
)
SUMMARY_PROMPT = (
    "Summarize the conversation so far for yourself, to continue the task with less context: what the task is, "
    "what you tried, what worked, what failed and why, and the names of the variables that hold your results. "
    "Be brief (at most 200 words). Do not write code."
)
