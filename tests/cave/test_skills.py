"""Agent Skills: validation of every front-matter rule, discovery, lazy exports, level-3 safety,
and the bundled skills on real data (matplotlib's sample stock prices; a real SQLite file)."""

from __future__ import annotations

import hashlib
import os
import shutil
import sys
import textwrap
from pathlib import Path

import pandas as pd
import pytest
import sqlalchemy as sa
from cave.runtimes.inprocess import InProcessRuntime

from cave import skills as sk
from cave.cli import skills as skills_cli
from cave.skills import Problem, SkillError, SkillSet, parse_skill

BUNDLED = ["dataframe-analysis", "report", "sql"]


def make_skill(
    root: Path, folder: str, front: str | None, body: str = "# Body\n\nDo the thing.\n", files: dict | None = None
) -> Path:
    """A skill folder: SKILL.md from ``front`` (YAML without delimiters; None = no front matter) + files."""
    path = root / folder
    path.mkdir(parents=True, exist_ok=True)
    text = body if front is None else f"---\n{textwrap.dedent(front).strip()}\n---\n{body}"
    (path / "SKILL.md").write_text(text)
    for rel, content in (files or {}).items():
        target = path / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(textwrap.dedent(content))
    return path


def problems_of(tmp_path: Path, folder: str, front: str | None, **kw) -> tuple[sk.Skill | None, list[Problem]]:
    return parse_skill(make_skill(tmp_path, folder, front, **kw))


def errors(problems: list[Problem]) -> dict[str | None, str]:
    return {p.field: p.message for p in problems if p.severity == "error"}


@pytest.fixture
def runtime():
    rt = InProcessRuntime(timeout=60)
    yield rt
    rt.close()


@pytest.fixture(scope="module")
def stocks_csv() -> Path:
    pytest.importorskip("matplotlib")
    from matplotlib import cbook

    return Path(cbook.get_sample_data("Stocks.csv", asfileobj=False))


@pytest.fixture(scope="module")
def stocks(stocks_csv) -> pd.DataFrame:
    """Monthly closes of 8 stocks and 2 indexes, 1990-2017 (wide, with real gaps)."""
    return pd.read_csv(stocks_csv, comment="#", parse_dates=["Date"])


@pytest.fixture(scope="module")
def prices(stocks) -> pd.DataFrame:
    long = stocks.melt(id_vars="Date", var_name="symbol", value_name="close").dropna()
    long["year"] = long["Date"].dt.year
    return long.reset_index(drop=True)


# -- validation: one case per rule -----------------------------------------------------------------
def test_valid_minimal_skill(tmp_path):
    skill, problems = problems_of(tmp_path, "pdf-tools", "name: pdf-tools\ndescription: Work with PDF files.")
    assert problems == []
    assert skill.name == "pdf-tools" and skill.description == "Work with PDF files."
    assert skill.body.startswith("# Body") and skill.exports is None


def test_all_optional_fields_parsed(tmp_path):
    front = """
        name: full
        description: Everything set.
        license: Apache-2.0
        compatibility: Needs git and network access.
        metadata:
          author: someone
          version: "1.0"
        allowed-tools: Bash(git status:*) Read
    """
    skill, problems = problems_of(tmp_path, "full", front)
    assert problems == []
    assert skill.license == "Apache-2.0"
    assert skill.compatibility == "Needs git and network access."
    assert skill.metadata == {"author": "someone", "version": "1.0"}
    assert skill.allowed_tools == ["Bash(git status:*)", "Read"]


@pytest.mark.parametrize(
    "name, expected",
    [
        ("a" * 65, "limit is 64"),
        ("PDF-tools", "must be lowercase"),
        ("pdf_tools", "only letters, digits and hyphens"),
        ("pdf tools", "only letters, digits and hyphens"),
        ("pdf.tools", "only letters, digits and hyphens"),
        ("-pdf", "start or end with a hyphen"),
        ("pdf-", "start or end with a hyphen"),
        ("pdf--tools", "consecutive hyphens"),
    ],
)
def test_name_rules(tmp_path, name, expected):
    skill, problems = problems_of(tmp_path, name, f"name: '{name}'\ndescription: d")
    assert skill is None
    assert expected in errors(problems)["name"]
    assert all(p.file.endswith("SKILL.md") for p in problems)


def test_name_at_the_limit_is_valid(tmp_path):
    name = "a" * 60 + "-b2c"
    skill, problems = problems_of(tmp_path, name, f"name: {name}\ndescription: d")
    assert len(name) == 64 and skill is not None and problems == []


def test_name_must_equal_folder(tmp_path):
    skill, problems = problems_of(tmp_path, "pdf-tools", "name: pdf-helper\ndescription: d")
    assert skill is None
    assert "must equal the folder name 'pdf-tools'" in errors(problems)["name"]


@pytest.mark.parametrize("front", ["description: d", "name: 12\ndescription: d", "name: ''\ndescription: d"])
def test_name_required_string(tmp_path, front):
    skill, problems = problems_of(tmp_path, "x", front)
    assert skill is None and "name" in errors(problems)


@pytest.mark.parametrize(
    "front, expected",
    [
        ("name: x", "is required"),
        ("name: x\ndescription: ''", "non-empty string"),
        ("name: x\ndescription: [a, b]", "non-empty string"),
        (f"name: x\ndescription: {'d' * 1025}", "1025 characters; the limit is 1024"),
    ],
)
def test_description_rules(tmp_path, front, expected):
    skill, problems = problems_of(tmp_path, "x", front)
    assert skill is None
    assert expected in errors(problems)["description"]


def test_description_at_the_limit_is_valid(tmp_path):
    skill, problems = problems_of(tmp_path, "x", f"name: x\ndescription: {'d' * 1024}")
    assert skill is not None and problems == []


@pytest.mark.parametrize(
    "value, expected", [("'" + "c" * 501 + "'", "501 characters; the limit is 500"), ("42", "non-empty string")]
)
def test_compatibility_rules(tmp_path, value, expected):
    skill, problems = problems_of(tmp_path, "x", f"name: x\ndescription: d\ncompatibility: {value}")
    assert skill is None
    assert expected in errors(problems)["compatibility"]


def test_compatibility_at_the_limit_is_valid(tmp_path):
    skill, problems = problems_of(tmp_path, "x", f"name: x\ndescription: d\ncompatibility: {'c' * 500}")
    assert skill is not None and problems == []


def test_license_must_be_a_string(tmp_path):
    skill, problems = problems_of(tmp_path, "x", "name: x\ndescription: d\nlicense: {spdx: MIT}")
    assert skill is None and "must be a string" in errors(problems)["license"]


def test_license_is_optional(tmp_path):
    skill, _ = problems_of(tmp_path, "x", "name: x\ndescription: d")
    assert skill.license is None


def test_metadata_must_be_a_mapping(tmp_path):
    skill, problems = problems_of(tmp_path, "x", "name: x\ndescription: d\nmetadata: [a, b]")
    assert skill is None and "mapping of strings to strings" in errors(problems)["metadata"]


@pytest.mark.parametrize(
    "meta, field, kept",
    [
        ("{version: 1.10}", "metadata.version", {"version": "1.10"}),  # as written, not the float 1.1
        ("{created: 2024-01-02}", "metadata.created", {"created": "2024-01-02"}),
        ("{internal: true, count: 3}", "metadata.internal", {"internal": "true", "count": "3"}),
        ("{1: one}", "metadata", {"1": "one"}),
        ("{tags: [a, b]}", "metadata.tags", {"tags": "[a, b]"}),
    ],
)
def test_metadata_values_that_are_not_strings_are_kept_as_written_with_a_warning(tmp_path, meta, field, kept):
    """Skills in the wild write `version: 1.0` unquoted; the standard's reference parser reads every value as text."""
    skill, problems = problems_of(tmp_path, "x", f"name: x\ndescription: d\nmetadata: {meta}")
    assert skill is not None and skill.metadata == kept
    assert field in {p.field for p in problems} and {p.severity for p in problems} == {"warning"}


@pytest.mark.parametrize("name", ["数据分析", "café-tools", "données"])
def test_names_in_other_scripts_are_valid(tmp_path, name):
    """The reference validator reads names NFKC-normalized: lowercase letters of any script, digits, hyphens."""
    skill, problems = problems_of(tmp_path, name, f"name: {name}\ndescription: d")
    assert problems == [] and skill is not None and skill.name == name


def test_allowed_tools_space_delimited_string(tmp_path):
    skill, problems = problems_of(tmp_path, "x", "name: x\ndescription: d\nallowed-tools: Read Write Bash(jq:*)")
    assert problems == [] and skill.allowed_tools == ["Read", "Write", "Bash(jq:*)"]


def test_allowed_tools_wrong_type_is_an_error(tmp_path):
    skill, problems = problems_of(tmp_path, "x", "name: x\ndescription: d\nallowed-tools: 3")
    assert skill is None and "space-delimited string" in errors(problems)["allowed-tools"]


def test_allowed_tools_list_is_accepted_with_a_warning(tmp_path):
    skill, problems = problems_of(tmp_path, "x", "name: x\ndescription: d\nallowed-tools: [Read, Write]")
    assert skill.allowed_tools == ["Read", "Write"]
    assert [(p.field, p.severity) for p in problems] == [("allowed-tools", "warning")]


def test_unknown_fields_are_reported_but_not_fatal(tmp_path):
    skill, problems = problems_of(tmp_path, "x", "name: x\ndescription: d\nversion: 2\nuser-invocable: true")
    assert skill is not None
    assert {p.field for p in problems} == {"version", "user-invocable"}
    assert all(p.severity == "warning" and "move it under `metadata:`" in p.message for p in problems)


def test_missing_front_matter(tmp_path):
    skill, problems = problems_of(tmp_path, "x", None, body="# Just a body\n")
    assert skill is None
    assert problems[0].field == "front matter" and "missing YAML front matter" in problems[0].message
    assert problems[0].file == str(tmp_path / "x" / "SKILL.md")


def test_unterminated_front_matter(tmp_path):
    path = tmp_path / "x"
    path.mkdir()
    (path / "SKILL.md").write_text("---\nname: x\ndescription: d\n# no closing line\n")
    skill, problems = parse_skill(path)
    assert skill is None and problems[0].field == "front matter"


def test_invalid_yaml_reports_the_line(tmp_path):
    skill, problems = problems_of(tmp_path, "x", "name: x\ndescription: Use when: the user asks")
    assert skill is None
    p = problems[0]
    assert p.field == "front matter" and "invalid YAML at line 3" in p.message and "quote" in p.message


def test_front_matter_must_be_a_mapping(tmp_path):
    skill, problems = problems_of(tmp_path, "x", "- just\n- a list")
    assert skill is None and "must be a YAML mapping" in problems[0].message


def test_exports_key_must_stay_inside_the_folder(tmp_path):
    front = "name: x\ndescription: d\nmetadata:\n  cave-exports: ../elsewhere.py"
    skill, problems = problems_of(tmp_path, "x", front)
    assert skill is None and "'..' is not allowed" in errors(problems)["metadata.cave-exports"]


def test_exports_key_names_the_module(tmp_path):
    front = "name: x\ndescription: d\nmetadata:\n  cave-exports: lib/tools.py"
    skill, problems = problems_of(tmp_path, "x", front, files={"lib/tools.py": "__all__ = ['f']\ndef f(): return 1\n"})
    assert problems == [] and skill.exports == tmp_path / "x" / "lib" / "tools.py"
    assert skill.export_names() == ["f"]


def test_problem_str_names_file_and_field():
    p = Problem("/s/x/SKILL.md", "name", "must equal the folder name 'x'")
    assert str(p) == "error: /s/x/SKILL.md: name: must equal the folder name 'x'"


# -- discovery ---------------------------------------------------------------------------------------
def test_bundled_skills_are_valid():
    s = SkillSet(entry_points=False)
    assert s.names == BUNDLED and s.problems == []
    for name in BUNDLED:
        skill = s.get(name)
        assert skill.source == "bundled" and skill.exports is not None and skill.export_names()


def test_invalid_skills_are_skipped_not_fatal(tmp_path):
    make_skill(tmp_path, "good", "name: good\ndescription: fine")
    make_skill(tmp_path, "bad", "name: Bad\ndescription: broken name")
    make_skill(tmp_path, "worse", None)
    (tmp_path / "not-a-skill").mkdir()
    s = SkillSet([tmp_path], bundled=False, entry_points=False)
    assert s.names == ["good"]
    assert {Path(p.file).parent.name for p in s.errors} == {"bad", "worse"}
    with pytest.raises(SkillError, match="invalid"):
        s.get("bad")


def test_a_path_may_be_a_skill_folder_itself(tmp_path):
    path = make_skill(tmp_path, "solo", "name: solo\ndescription: one skill")
    assert SkillSet([path], bundled=False, entry_points=False).names == ["solo"]


def test_missing_folder_is_reported(tmp_path):
    s = SkillSet([tmp_path / "nope"], bundled=False, entry_points=False)
    assert s.skills == [] and "does not exist" in s.errors[0].message


def test_user_skill_shadows_bundled_one(tmp_path):
    make_skill(tmp_path, "sql", "name: sql\ndescription: my own sql skill")
    s = SkillSet([tmp_path], entry_points=False)
    assert s.get("sql").description == "my own sql skill"
    shadowed = [p for p in s.problems if p.field == "name" and p.severity == "warning"]
    assert len(shadowed) == 1 and "shadowed" in shadowed[0].message


def test_entry_point_discovery(tmp_path, monkeypatch):
    """A real installed distribution (dist-info on sys.path) naming skill folders in group cave.skills."""
    pkg = tmp_path / "acme_skills"
    make_skill(pkg / "skills", "acme-search", "name: acme-search\ndescription: Search ACME.")
    (pkg / "__init__.py").write_text("from pathlib import Path\nSKILLS = Path(__file__).parent / 'skills'\n")
    make_skill(tmp_path / "acme_more", "acme-more", "name: acme-more\ndescription: A package that is a skills folder.")
    (tmp_path / "acme_more" / "__init__.py").write_text("")
    dist = tmp_path / "acme_skills-0.1.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: acme-skills\nVersion: 0.1\n")
    (dist / "entry_points.txt").write_text(
        "[cave.skills]\nacme = acme_skills:SKILLS\nmore = acme_more\nbroken = acme_missing_module_xyz:SKILLS\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    s = SkillSet(bundled=False)
    assert {"acme-search", "acme-more"} <= set(s.names)
    assert s.get("acme-search").source == "entry point acme" and s.get("acme-more").source == "entry point more"
    broken = [p for p in s.errors if "broken" in p.file]
    assert broken and "ModuleNotFoundError" in broken[0].message


def test_select_and_unknown_names():
    s = SkillSet(entry_points=False)
    assert s.select(["sql"]).names == ["sql"]
    with pytest.raises(SkillError, match="no skill named 'nope'; available skills: .*sql"):
        s.select(["nope"])


def test_prompt_section_is_level_one_only():
    s = SkillSet(entry_points=False)
    text = s.prompt_section()
    for skill in s:
        assert f"- {skill.name}: {skill.description}" in text
    assert "activate_skill(" in text
    assert "## Workflow" not in text  # bodies are level 2
    assert SkillSet.from_skills([]).prompt_section() == ""


# -- lazy import of exports --------------------------------------------------------------------------
def test_exports_are_imported_on_activation_not_discovery(tmp_path, runtime):
    marker = tmp_path / "imported.txt"
    exports = f"""
        from pathlib import Path
        Path({str(marker)!r}).write_text("imported")
        __all__ = ["greet", "GREETING", "Point"]
        GREETING = "hello"
        class Point:
            '''A point.'''
            def __init__(self, x, y):
                self.x, self.y = x, y
        def greet(who: str) -> str:
            '''Say hello.'''
            return f"{{GREETING}}, {{who}}"
    """
    make_skill(tmp_path, "greeter", "name: greeter\ndescription: Greets.", files={"exports.py": exports})
    s = SkillSet([tmp_path], bundled=False, entry_points=False)
    assert s.names == ["greeter"] and not marker.exists() and "cave_skill_greeter" not in sys.modules
    s.install(runtime)
    assert not marker.exists()
    names_before = {v.name for v in runtime.describe()}
    assert "greet" not in names_before and {"activate_skill", "read_skill_file"} <= names_before
    ex = runtime.execute('text = activate_skill("greeter")\nprint(greet("world"))')
    assert ex.ok, ex.error
    assert ex.stdout == "hello, world\n" and marker.exists()
    infos = {v.name: v for v in runtime.describe()}
    assert infos["greet"].kind == "function" and "greet(who: str) -> str" in infos["greet"].preview
    assert infos["Point"].kind == "type" and infos["GREETING"].kind == "variable"
    text = runtime.retrieve("text")
    assert "# Body" in text
    assert "- functions: greet\n- types: Point\n- variables: GREETING" in text


def test_in_process_runtimes_get_their_own_copy_of_the_exports():
    """Each activation executes the module afresh: one runtime's skill state never leaks into another."""
    s = SkillSet(entry_points=False)
    a, b = InProcessRuntime(), InProcessRuntime()
    try:
        for rt in (a, b):
            s.install(rt)
            assert rt.execute('activate_skill("dataframe-analysis", quiet=True)').ok
        a.execute('PLOT_DEFAULTS["dpi"] = 300')
        assert b.execute('PLOT_DEFAULTS["dpi"]').result == "100"
        assert a.retrieve("profile") is not b.retrieve("profile")
    finally:
        a.close()
        b.close()


@pytest.mark.parametrize("name", BUNDLED)
def test_bundled_activation_text_fits_an_observation(runtime, name):
    """The agent sees activate_skill's text as an observation (3000 characters by default in cave.agent):
    the instructions must fit whole, or the middle of them would be cut."""
    SkillSet(entry_points=False).install(runtime)
    ex = runtime.execute(f"print(activate_skill({name!r}))")
    assert ex.ok and len(ex.stdout) < 3000, len(ex.stdout)
    assert "## Now in your namespace" in ex.stdout


def test_broken_exports_do_not_break_discovery_and_fail_on_activation(tmp_path, runtime):
    broken = {"exports.py": "import acme_not_installed_xyz\n__all__ = []\n"}
    make_skill(tmp_path, "broken", "name: broken\ndescription: Needs a missing package.", files=broken)
    make_skill(tmp_path, "fine", "name: fine\ndescription: Works.")
    s = SkillSet([tmp_path], bundled=False, entry_points=False)
    assert s.names == ["broken", "fine"] and s.problems == []
    s.install(runtime)
    ex = runtime.execute('activate_skill("broken")')
    assert not ex.ok and ex.error.type == "SkillError"
    assert "importing exports.py failed: ModuleNotFoundError" in ex.error.message
    assert "acme_not_installed_xyz" in ex.error.message
    assert runtime.execute('activate_skill("fine")').ok  # the others still work
    with pytest.raises(SkillError, match="activating skill 'broken' in the runtime failed"):
        s.activate("broken", runtime)


def test_module_without_all_or_exports_is_reported(tmp_path, runtime):
    make_skill(tmp_path, "vague", "name: vague\ndescription: d", files={"exports.py": "def f(): pass\n"})
    s = SkillSet([tmp_path], bundled=False, entry_points=False)
    s.install(runtime)
    ex = runtime.execute('activate_skill("vague")')
    assert "defines neither __all__ nor EXPORTS" in ex.error.message


def test_exports_dict_and_reactivation_keeps_objects(tmp_path, runtime):
    make_skill(
        tmp_path,
        "dicty",
        "name: dicty\ndescription: d",
        files={"exports.py": "class Box:\n    pass\nEXPORTS = {'Box': Box, 'LIMIT': 3}\n"},
    )
    s = SkillSet([tmp_path], bundled=False, entry_points=False)
    s.install(runtime)
    ex = runtime.execute(
        'activate_skill("dicty", quiet=True)\nb = Box()\nactivate_skill("dicty")\nisinstance(b, Box), LIMIT'
    )
    assert ex.ok and ex.result == "(True, 3)"


def test_host_activation_for_task_yaml(runtime):
    s = SkillSet(entry_points=False).select(["sql"])
    text = s.activate("sql", runtime)
    assert "# SQL (read-only)" in text and "query" in text
    assert "activate_skill" in runtime.registered  # installed on demand
    infos = {v.name: v for v in runtime.describe()}
    assert infos["query"].kind == "function" and infos["WriteRefused"].kind == "type"
    with pytest.raises(SkillError, match="no skill named 'report'"):
        s.activate("report", runtime)


def test_exports_reach_the_agent_prompt_on_the_next_step(stocks):
    """The real agent loop: step 1 activates, step 2's prompt lists the exports (in the state note after step 1's
    observation: the system prompt itself stays as it was, for the prefix cache)."""
    agent_mod = pytest.importorskip("cave.agent")
    from cave.llm.base import Scripted

    llm = Scripted(
        [
            '```python\nprint(activate_skill("dataframe-analysis"))\n```',
            "```python\np = profile(stocks)\nfinal_answer(p)\n```",
        ]
    )
    rt = InProcessRuntime()
    rt.inject("stocks", stocks, description="monthly closes")
    try:
        agent = agent_mod.Agent(model=llm, runtime=rt, skills=SkillSet(entry_points=False), max_steps=3)
        result = agent.run("Profile the stocks table")
    finally:
        rt.close()
    first, second = llm.calls[0][0]["content"], llm.calls[1][-1]["content"]
    assert "dataframe-analysis:" in first and "profile(df" not in first
    state = second.split("Variables now in the session (new or changed):", 1)[1]
    assert "profile(df: pd.DataFrame) -> Profile" in state or "profile(df" in state
    assert type(result.answer).__name__ == "Profile" and result.answer.rows == len(stocks)


# -- level 3: files, scripts, and no way out --------------------------------------------------------
@pytest.fixture
def fenced(tmp_path):
    """A skill with resources, a secret next to it, and symlinks pointing out."""
    secret = tmp_path / "secret.txt"
    secret.write_text("TOP SECRET")
    outside_dir = tmp_path / "outside"
    outside_dir.mkdir()
    (outside_dir / "x.py").write_text("print('escaped')\n")
    root = tmp_path / "skills"
    path = make_skill(
        root,
        "fenced",
        "name: fenced\ndescription: d",
        files={
            "references/guide.md": "# Guide\nRead me.\n",
            "scripts/echo.py": "import sys, os\nprint('args:', *sys.argv[1:])\nprint('dir:', os.environ['SKILL_DIR'])\n",
            "scripts/fail.py": "import sys\nprint('bad input', file=sys.stderr)\nsys.exit(3)\n",
        },
    )
    (path / "references" / "leak.md").symlink_to(secret)
    (path / "scripts" / "out").symlink_to(outside_dir, target_is_directory=True)
    (path / "assets").mkdir()
    (path / "assets" / "logo.bin").write_bytes(bytes(range(256)))
    s = SkillSet([root], bundled=False, entry_points=False)
    return s, s.catalog(), path


def test_level3_lists_and_reads(fenced):
    _, cat, path = fenced
    files = cat.skill_files("fenced")
    assert files == ["SKILL.md", "assets/logo.bin", "references/guide.md", "scripts/echo.py", "scripts/fail.py"]
    assert cat.read_skill_file("fenced", "references/guide.md") == "# Guide\nRead me.\n"
    assert cat.skill_file_path("fenced", "assets/logo.bin") == str((path / "assets" / "logo.bin").resolve())
    with pytest.raises(SkillError, match="not text; use skill_file_path"):
        cat.read_skill_file("fenced", "assets/logo.bin")
    with pytest.raises(SkillError, match="has no file 'references/nope.md'; its files"):
        cat.read_skill_file("fenced", "references/nope.md")


@pytest.mark.parametrize(
    "bad, reason",
    [
        ("../secret.txt", "'..' is not allowed"),
        ("references/../../secret.txt", "'..' is not allowed"),
        ("..\\secret.txt", "'..' is not allowed"),
        ("/etc/passwd", "absolute paths are not allowed"),
        ("~/.bashrc", "absolute paths are not allowed"),
        ("C:/Windows/win.ini", "absolute paths are not allowed"),
        ("references/leak.md", "resolves outside the skill folder"),
        ("scripts/out/x.py", "resolves outside the skill folder"),
        ("", "non-empty path"),
    ],
)
def test_level3_traversal_refused(fenced, bad, reason):
    _, cat, _ = fenced
    for call in (cat.read_skill_file, cat.skill_file_path, cat.run_skill_script):
        with pytest.raises(SkillError, match=reason.replace("(", r"\(")):
            call("fenced", bad)


def test_level3_refusals_reach_the_agent_inside_the_runtime(fenced, runtime):
    s, _, _ = fenced
    s.install(runtime)
    ex = runtime.execute('read_skill_file("fenced", "references/leak.md")')
    assert ex.error.type == "SkillError" and "resolves outside" in ex.error.message and "TOP SECRET" not in str(ex)
    ex = runtime.execute('run_skill_script("fenced", "../outside/x.py")')
    assert "'..' is not allowed" in ex.error.message and "escaped" not in ex.stdout


def test_run_skill_script(fenced, tmp_path):
    _, cat, path = fenced
    out = cat.run_skill_script("fenced", "scripts/echo.py", "a b", 3)
    assert out.splitlines() == ["args: a b 3", f"dir: {path.resolve()}"]
    with pytest.raises(SkillError, match="exited with status 3:\nbad input"):
        cat.run_skill_script("fenced", "scripts/fail.py")
    with pytest.raises(SkillError, match="only files under scripts/ can be run"):
        cat.run_skill_script("fenced", "references/guide.md")


def test_unknown_skill_in_runtime_api(fenced):
    _, cat, _ = fenced
    with pytest.raises(SkillError, match="no skill named 'other'; available skills: fenced"):
        cat.skill_files("other")


# -- bundled skills on real data ---------------------------------------------------------------------
@pytest.fixture
def activated(runtime):
    s = SkillSet(entry_points=False)
    s.install(runtime)
    return runtime


def test_dataframe_analysis_on_real_prices(activated, stocks, prices, tmp_path):
    rt = activated
    rt.inject("stocks", stocks)
    rt.inject("prices", prices)
    rt.inject("out", str(tmp_path))
    code = """
activate_skill("dataframe-analysis", quiet=True)
p = profile(stocks)
by_symbol = group_summary(prices, "symbol", "close", ["count", "mean", "max"], sort_by="close_mean")
yearly = pivot(prices, index="year", columns="symbol", values="close", aggfunc="mean")
top = top_n(prices, "close", 3)
freq = frequency(prices, "symbol", 3)
charts = [
    plot_bar(by_symbol, x="symbol", y="close_mean", path=out + "/bar.png", title="Mean close"),
    plot_line(prices[prices.symbol.isin(["IBM", "MSFT"])].pivot(index="Date", columns="symbol", values="close").reset_index(),
              x="Date", y=["IBM", "MSFT"], path=out + "/line.png"),
    plot_hist(prices, "close", path=out + "/hist.png", bins=40),
    plot_scatter(stocks, x="IBM", y="MSFT", path=out + "/scatter.png"),
]
print(p)
"""
    ex = rt.execute(code)
    assert ex.ok, ex.error
    p = rt.retrieve("p")
    assert (p.rows, p.columns) == stocks.shape
    assert p.table["nulls"].to_dict() == {str(k): int(v) for k, v in stocks.isna().sum().items()}
    assert p.table.loc["DELL", "nulls"] == 453 and p.table.loc["Date", "dtype"].startswith("datetime64")
    assert p.table.loc["IBM", "max"] == pytest.approx(stocks["IBM"].max())
    assert sorted(p.columns_with_nulls()) == sorted(c for c in stocks.columns if c != "Date")
    assert "Profile: 524 rows x 11 columns" in ex.stdout

    by_symbol = rt.retrieve("by_symbol")
    expected = prices.groupby("symbol")["close"].mean()
    assert list(by_symbol.columns) == ["symbol", "close_count", "close_mean", "close_max"]
    assert by_symbol.set_index("symbol")["close_mean"].to_dict() == pytest.approx(expected.to_dict())
    assert by_symbol["symbol"].iloc[0] == expected.idxmax()  # sorted descending
    yearly = rt.retrieve("yearly")
    assert yearly.loc[2000, "AAPL"] == pytest.approx(prices.query("year == 2000 and symbol == 'AAPL'")["close"].mean())
    assert rt.retrieve("top")["close"].tolist() == sorted(prices["close"], reverse=True)[:3]
    assert rt.retrieve("freq")["count"].sum() <= len(prices)

    from PIL import Image

    for chart in rt.retrieve("charts"):
        with Image.open(chart) as im:
            assert im.format == "PNG" and im.size[0] > 300 and im.size[1] > 200


def test_dataframe_analysis_script_on_a_real_csv(activated, stocks_csv):
    ex = activated.execute(
        f'out = run_skill_script("dataframe-analysis", "scripts/profile_csv.py", {str(stocks_csv)!r}, "--comment", "#")'
    )
    assert ex.ok, ex.error
    out = activated.retrieve("out")
    assert "Profile: 524 rows x 11 columns" in out and "GOOGL" in out


@pytest.fixture(scope="module")
def stocks_db_template(tmp_path_factory, stocks):
    """A real SQLite file: tickers and monthly prices (long format) with a foreign key."""
    path = tmp_path_factory.mktemp("db") / "stocks.db"
    engine = sa.create_engine(f"sqlite:///{path}")
    names = {"IBM": "IBM", "AAPL": "Apple", "MSFT": "Microsoft", "XRX": "Xerox", "AMZN": "Amazon", "DELL": "Dell"}
    names |= {"GOOGL": "Alphabet", "ADBE": "Adobe", "^GSPC": "S&P 500", "^IXIC": "NASDAQ Composite"}
    long = stocks.melt(id_vars="Date", var_name="symbol", value_name="close").dropna()
    with engine.begin() as conn:
        conn.exec_driver_sql("CREATE TABLE tickers (symbol TEXT PRIMARY KEY, name TEXT NOT NULL, kind TEXT NOT NULL)")
        conn.exec_driver_sql(
            "CREATE TABLE prices (id INTEGER PRIMARY KEY, date TEXT NOT NULL,"
            " symbol TEXT NOT NULL REFERENCES tickers(symbol), close REAL NOT NULL)"
        )
        conn.execute(
            sa.text("INSERT INTO tickers VALUES (:s, :n, :k)"),
            [{"s": s, "n": n, "k": "index" if s.startswith("^") else "stock"} for s, n in names.items()],
        )
        conn.execute(
            sa.text("INSERT INTO prices (date, symbol, close) VALUES (:d, :s, :c)"),
            [{"d": d.date().isoformat(), "s": s, "c": c} for d, s, c in long.itertuples(index=False)],
        )
    engine.dispose()
    return path, long


@pytest.fixture
def stocks_db(tmp_path, stocks_db_template):
    """A fresh copy of the database per test, with its own engine."""
    template, long = stocks_db_template
    path = tmp_path / "stocks.db"
    shutil.copyfile(template, path)
    engine = sa.create_engine(f"sqlite:///{path}")
    yield engine, path, long
    engine.dispose()


def _sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def test_sql_schema_and_queries_on_a_real_sqlite_file(activated, stocks_db):
    engine, path, long = stocks_db
    rt = activated
    rt.inject("engine", engine)
    code = """
activate_skill("sql", quiet=True)
tables = list_tables(engine)
cols = describe_table(engine, "prices")
text = schema(engine)
yearly = query(engine, '''
    SELECT t.name, strftime('%Y', p.date) AS year, AVG(p.close) AS avg_close, COUNT(*) AS n
    FROM prices p JOIN tickers t ON t.symbol = p.symbol
    WHERE p.symbol = :sym GROUP BY year ORDER BY year''', {"sym": "MSFT"})
positional = query(engine, "SELECT COUNT(*) AS n FROM prices WHERE close > ?", [100])
capped = query(engine, "SELECT * FROM prices", max_rows=50)
plan = explain(engine, "SELECT * FROM tickers WHERE symbol = ?", ["IBM"])
peek = sample(engine, "tickers", 3)
"""
    ex = rt.execute(code)
    assert ex.ok, ex.error
    assert rt.retrieve("tables") == ["prices", "tickers"]
    cols = rt.retrieve("cols").set_index("column")
    assert cols.loc["id", "primary_key"] and cols.loc["symbol", "references"] == "tickers.symbol"
    assert not cols.loc["close", "nullable"]
    text = rt.retrieve("text")
    assert f"prices ({len(long)} rows)" in text and "tickers (10 rows)" in text and "symbol: TEXT" in text
    yearly = rt.retrieve("yearly")
    msft = long[long.symbol == "MSFT"]
    expect = msft.groupby(msft.Date.dt.year)["close"].mean()
    assert yearly["year"].astype(int).tolist() == expect.index.tolist()
    assert yearly["avg_close"].tolist() == pytest.approx(expect.tolist())
    assert set(yearly["name"]) == {"Microsoft"}
    assert rt.retrieve("positional")["n"].iloc[0] == int((long.close > 100).sum())
    capped = rt.retrieve("capped")
    assert len(capped) == 50 and capped.attrs["truncated"] and "kept the first 50" in ex.stderr
    assert "PRIMARY KEY" in " ".join(rt.retrieve("plan")["detail"]) or "sqlite_autoindex" in str(rt.retrieve("plan"))
    assert len(rt.retrieve("peek")) == 3


@pytest.mark.parametrize(
    "statement",
    [
        "INSERT INTO tickers VALUES ('TSLA', 'Tesla', 'stock')",
        "UPDATE prices SET close = 0",
        "DELETE FROM prices",
        "DROP TABLE prices",
        "CREATE TABLE notes (x TEXT)",
        "CREATE TEMP TABLE scratch AS SELECT * FROM prices",
        "ALTER TABLE tickers ADD COLUMN sector TEXT",
        "CREATE INDEX ix ON prices(close)",
        "PRAGMA query_only = OFF",
        "PRAGMA user_version = 7",
        "ATTACH DATABASE '{dir}/evil.db' AS evil",
        "VACUUM",
        "REPLACE INTO tickers VALUES ('IBM', 'x', 'y')",
        "WITH x AS (SELECT 1) DELETE FROM prices",
    ],
)
def test_sql_refuses_writes(activated, stocks_db, statement):
    engine, path, long = stocks_db
    before = _sha(path)
    rt = activated
    rt.inject("engine", engine)
    stmt = statement.format(dir=path.parent)
    ex = rt.execute(f'activate_skill("sql", quiet=True)\nquery(engine, {stmt!r})')
    assert not ex.ok and ex.error.type == "WriteRefused", ex.error
    assert "only reads" in ex.error.message
    assert _sha(path) == before and not (path.parent / "evil.db").exists()


def test_sql_multiple_statements_cannot_smuggle_a_write(activated, stocks_db):
    engine, path, long = stocks_db
    before = _sha(path)
    activated.inject("engine", engine)
    ex = activated.execute('activate_skill("sql", quiet=True)\nquery(engine, "SELECT 1; DROP TABLE prices")')
    assert not ex.ok and "one statement at a time" in ex.error.message
    assert _sha(path) == before


def test_sql_leaves_the_engine_writable_for_the_host(activated, stocks_db):
    """The read-only guard is per connection use: the host's own writes through the pool still work."""
    engine, path, long = stocks_db
    activated.inject("engine", engine)
    assert not activated.execute('activate_skill("sql", quiet=True)\nquery(engine, "DELETE FROM prices")').ok
    with engine.begin() as conn:
        conn.exec_driver_sql("INSERT INTO tickers VALUES ('TSLA', 'Tesla', 'stock')")
        assert conn.exec_driver_sql("PRAGMA query_only").scalar() == 0
    ex = activated.execute('int(query(engine, "SELECT COUNT(*) AS n FROM tickers")["n"].iloc[0])')
    assert ex.ok and ex.result == "11"


def test_sql_schema_markdown_script(activated, stocks_db):
    engine, path, long = stocks_db
    out = activated.execute(f'run_skill_script("sql", "scripts/schema_markdown.py", "sqlite:///{path}")')
    assert out.ok, out.error
    assert f"## prices ({len(long)} rows)" in out.result and "| symbol | TEXT |  | tickers.symbol |" in out.result


def test_report_from_real_results(activated, prices, tmp_path):
    rt = activated
    rt.inject("prices", prices)
    rt.inject("out", str(tmp_path))
    code = """
activate_skill("dataframe-analysis", quiet=True)
activate_skill("report", quiet=True)
by_symbol = group_summary(prices, "symbol", "close", ["count", "mean"], sort_by="close_mean")
chart = plot_bar(by_symbol, x="symbol", y="close_mean", path=out + "/plots/mean.png")
r = Report("Stock prices 1990-2017", subtitle="matplotlib sample data")
r.heading("Summary").text("**IBM** and the *indexes* lead; see the table. <script>alert(1)</script>")
r.metrics({"rows": len(prices), "symbols": prices.symbol.nunique()})
r.table(by_symbol, caption="Mean monthly close", max_rows=5)
r.image(chart, caption="Mean close by symbol")
paths = r.save(out + "/report")
quick = write_report("Quick", ["Two tables.", ("By symbol", by_symbol.head(3)), chart], directory=out + "/quick")
"""
    ex = rt.execute(code)
    assert ex.ok, ex.error
    paths = rt.retrieve("paths")
    md = Path(paths["markdown"]).read_text()
    page = Path(paths["html"]).read_text()
    assert md.startswith("# Stock prices 1990-2017\n") and "## Summary" in md
    assert "| symbol | close_count | close_mean |" in md and "*showing 5 of 10 rows*" in md
    assert "![Mean close by symbol](images/mean.png)" in md and (tmp_path / "report/images/mean.png").is_file()
    assert f"| rows | {len(prices):,} |" in md
    import base64
    import html.parser

    chart_bytes = Path(rt.retrieve("chart")).read_bytes()
    assert base64.b64encode(chart_bytes).decode() in page
    assert "<strong>IBM</strong>" in page and "<script>" not in page and "&lt;script&gt;" in page

    class Counter(html.parser.HTMLParser):
        tags: dict[str, int] = {}

        def handle_starttag(self, tag, attrs):
            self.tags[tag] = self.tags.get(tag, 0) + 1

    c = Counter()
    c.feed(page)
    assert c.tags["table"] == 2 and c.tags["tr"] == (1 + 2) + (1 + 5) and c.tags["img"] == 1
    quick = rt.retrieve("quick")
    assert "| symbol |" in Path(quick["markdown"]).read_text() and Path(quick["html"]).is_file()


# -- the CLI commands --------------------------------------------------------------------------------
def test_cmd_list(capsys, monkeypatch, tmp_path):
    monkeypatch.setenv("COLUMNS", "200")
    assert skills_cli.cmd_list(None) == 0
    out = capsys.readouterr().out
    for name in BUNDLED:
        assert name in out
    assert "profile" in out and "bundled" in out
    make_skill(tmp_path, "oops", "name: Oops\ndescription: d")
    make_skill(tmp_path, "marked", "name: marked\ndescription: 'Reads [bold] and [red]x[/red] as text'")
    assert skills_cli.cmd_list([str(tmp_path)]) == 1
    out = capsys.readouterr().out
    assert "Problems" in out and "must be lowercase" in out
    assert "Reads [bold] and [red]x[/red] as text" in out  # a skill's own text is not read as rich markup


def test_cmd_show(capsys, monkeypatch):
    monkeypatch.setenv("COLUMNS", "200")
    assert skills_cli.cmd_show("sql", None) == 0
    out = capsys.readouterr().out
    assert "read-only" in out and "scripts/schema_markdown.py" in out and "Workflow" in out
    assert "exports.py: LIMITS, WriteRefused" in out
    assert skills_cli.cmd_show("nope", None) == 1
    assert "no skill named 'nope'" in capsys.readouterr().out


# -- another process: a raw IPython kernel, then the kernel runtime -----------------------------------
def _kernel_run(kc, code: str) -> tuple[str, dict | None]:
    out, err = [], None

    def hook(msg):
        nonlocal err
        if msg["msg_type"] == "stream":
            out.append(msg["content"]["text"])
        elif msg["msg_type"] == "error":
            err = msg["content"]

    kc.execute_interactive(code, timeout=60, output_hook=hook)
    return "".join(out), err


def test_activation_in_a_real_ipython_kernel(stocks_db, tmp_path):
    """What a kernel runtime does: the catalog's bound methods are pickled into IPython's user
    namespace; activation imports the exports *there* and binds them into ``user_ns``."""
    pytest.importorskip("ipykernel")
    manager = pytest.importorskip("jupyter_client.manager")
    import cloudpickle

    engine, path, long = stocks_db
    blob = tmp_path / "api.pkl"
    catalog = SkillSet(entry_points=False).catalog()
    blob.write_bytes(cloudpickle.dumps({name: getattr(catalog, name) for name in sk.API_NAMES}))
    km, kc = manager.start_new_kernel(kernel_name="python3")
    try:
        out, err = _kernel_run(
            kc,
            "import pickle, sqlalchemy, sys\n"
            f"globals().update(pickle.load(open({str(blob)!r}, 'rb')))\n"
            "print('before', 'cave_skill_sql' in sys.modules)\n"
            f"engine = sqlalchemy.create_engine('sqlite:///{path}')\n"
            "text = activate_skill('sql')\n"
            "print('after', 'cave_skill_sql' in sys.modules)\n"
            "print(int(query(engine, 'SELECT COUNT(*) AS n FROM prices')['n'].iloc[0]))\n"
            "print(sorted(n for n in get_ipython().user_ns if n in ('query', 'schema', 'WriteRefused', 'LIMITS')))",
        )
        assert err is None, err
        assert out.splitlines() == [
            "before False",
            "after True",
            str(len(long)),
            "['LIMITS', 'WriteRefused', 'query', 'schema']",
        ]
        out, err = _kernel_run(kc, "query(engine, 'DROP TABLE prices')")
        assert err["ename"] == "WriteRefused"
    finally:
        kc.stop_channels()
        km.shutdown_kernel(now=True)
    assert sa.inspect(engine).get_table_names() == ["prices", "tickers"]


def test_activation_inside_a_kernel(stocks_db):
    """KernelRuntime: the catalog pickles into the kernel; the exports import there, not on the host;
    the engine arrives by recipe; the exports show in describe(); a restart keeps the skills API."""
    kernel = pytest.importorskip("cave.runtimes.kernel", reason="the kernel runtime is not available")
    engine, path, long = stocks_db
    rt = kernel.KernelRuntime()
    try:
        s = SkillSet(entry_points=False)
        s.install(rt)
        rt.inject("engine", engine)
        ex = rt.execute(
            "import os\n"
            'text = activate_skill("sql")\n'
            "n = int(query(engine, 'SELECT COUNT(*) AS n FROM prices')['n'].iloc[0])\n"
            "pid = os.getpid()"
        )
        assert ex.ok, ex.error
        assert rt.retrieve("n") == len(long) and rt.retrieve("pid") != os.getpid()
        assert "# SQL (read-only)" in rt.retrieve("text")
        infos = {v.name: v for v in rt.describe()}
        assert infos["query"].kind == "function" and "query(engine" in infos["query"].preview
        assert infos["WriteRefused"].kind == "type"
        refused = rt.execute("query(engine, 'DELETE FROM prices')")
        assert refused.error.type == "WriteRefused"
        assert s.activate("dataframe-analysis", rt).startswith("# Skill 'dataframe-analysis' is active")
        profile = rt.execute("p = profile(query(engine, 'SELECT * FROM prices'))\np.rows")
        assert profile.ok and profile.result == str(len(long))
        assert rt.retrieve("p").rows == len(long)  # the Profile type came back by value
        rt.restart()  # exports bound by activation are gone with the kernel; the API is re-injected
        names = {v.name for v in rt.describe()}
        assert "query" not in names and "activate_skill" in names
        assert rt.execute('activate_skill("sql", quiet=True)\nlist_tables(engine)').result == "['prices', 'tickers']"
    finally:
        rt.close()
    assert sa.inspect(engine).get_table_names() == ["prices", "tickers"]


def test_sql_skill_names_the_engine_as_the_examples_do():
    """The examples inject the engine as `db`; the skill's instructions use the same name, not another one."""
    text = (Path(__file__).resolve().parents[2] / "skills" / "sql" / "SKILL.md").read_text()
    body = text.split("# SQL (read-only)", 1)[1]
    assert "schema(db)" in body and "query(\n       db," in body
    assert "(engine" not in body and "usually `engine`" not in body
