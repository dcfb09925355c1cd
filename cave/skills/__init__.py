"""Agent Skills: discovery, validation, progressive disclosure, executable exports.

A skill is a folder with a ``SKILL.md`` (YAML front matter + Markdown instructions), following the
Agent Skills standard (agentskills.io), plus one cave extension: an *exports* module (``exports.py`` in
the folder, or the file named by ``metadata: {cave-exports: path.py}``) whose ``__all__`` or ``EXPORTS``
lists functions, variables and types that land in the agent's runtime when the skill is activated.

Progressive disclosure, as the standard describes it:

- level 1, always in the system prompt: each skill's name and description (:meth:`SkillSet.prompt_section`);
- level 2, on activation: the SKILL.md body, returned by ``activate_skill("name")`` inside the runtime
  (or :meth:`SkillSet.activate` on the host, for automatic activation declared in task.yaml);
- level 3, on demand: files under ``scripts/``, ``references/``, ``assets/`` through ``skill_files``,
  ``read_skill_file``, ``skill_file_path`` and ``run_skill_script`` -- which refuse any path that would
  leave the skill's folder (``..``, absolute paths, symlinks pointing out).

The exports module is imported **on activation, inside the runtime** (never at discovery): the functions
injected by :meth:`SkillSet.install` are bound methods of a small picklable :class:`SkillCatalog`, so they
work unchanged in an in-process runtime and in a kernel in another process. Activation binds the exports
into the namespace of the code that called it, so they appear in ``runtime.describe()`` -- and so in the
agent's prompt -- from the next step on.

Invalid skills never stop a run: they are skipped and reported in :attr:`SkillSet.problems` with the
file, the field and what to change.

One concept per module: ``spec`` (records, SKILL.md parsing and validation, safe paths), ``discovery`` (folders,
entry points, the bundled skills), ``catalog`` (what runs inside the runtime), ``skillset`` (the host side).
"""

from cave.skills.catalog import SkillCatalog
from cave.skills.discovery import bundled_root, discover
from cave.skills.skillset import SkillSet
from cave.skills.spec import (
    API_NAMES,
    ENTRY_POINT_GROUP,
    EXPORTS_FILE,
    EXPORTS_METADATA_KEY,
    MAX_COMPATIBILITY_LENGTH,
    MAX_DESCRIPTION_LENGTH,
    MAX_NAME_LENGTH,
    RESOURCE_DIRS,
    SKILL_FILE,
    STANDARD_FIELDS,
    Problem,
    Severity,
    Skill,
    SkillError,
    SkillRef,
    SkillText,
    list_files,
    parse_allowed_tools,
    parse_skill,
    safe_path,
    split_front_matter,
    static_exports,
    validate_name,
)

__all__ = [
    "API_NAMES",
    "ENTRY_POINT_GROUP",
    "EXPORTS_FILE",
    "EXPORTS_METADATA_KEY",
    "MAX_COMPATIBILITY_LENGTH",
    "MAX_DESCRIPTION_LENGTH",
    "MAX_NAME_LENGTH",
    "Problem",
    "RESOURCE_DIRS",
    "SKILL_FILE",
    "STANDARD_FIELDS",
    "Severity",
    "Skill",
    "SkillCatalog",
    "SkillError",
    "SkillRef",
    "SkillSet",
    "SkillText",
    "bundled_root",
    "discover",
    "list_files",
    "parse_allowed_tools",
    "parse_skill",
    "safe_path",
    "split_front_matter",
    "static_exports",
    "validate_name",
]
