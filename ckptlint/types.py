"""Values that cross module boundaries: locations, edits, fixes, diagnostics, results."""

from __future__ import annotations

import enum
import os
from dataclasses import dataclass, field


class Applicability(str, enum.Enum):
    """How safe it is to apply a fix without reading it (Ruff's terms)."""

    SAFE = "safe"
    UNSAFE = "unsafe"


class Severity(str, enum.Enum):
    """What goes wrong when a finding is left alone (DESIGN.md, "Severity"): the step crashes
    or the gradients are wrong (error), memory, speed or an implicit default (warning),
    advice that changes nothing by itself (info)."""

    ERROR = "error"
    WARNING = "warning"
    INFO = "info"

    @property
    def rank(self) -> int:
        """Higher is graver: `--fail-on warning` fails on ranks >= WARNING's."""
        return _SEVERITY_RANKS[self]


_SEVERITY_RANKS = {Severity.INFO: 0, Severity.WARNING: 1, Severity.ERROR: 2}


@dataclass(frozen=True, order=True)
class Location:
    """A position in a file: 1-based row, 1-based column counted in characters."""

    row: int
    column: int


@dataclass(frozen=True, order=True)
class Edit:
    """Replace the text between two locations (end exclusive) with `content`."""

    location: Location
    end_location: Location
    content: str


@dataclass(frozen=True)
class Fix:
    applicability: Applicability
    message: str
    edits: tuple[Edit, ...]


@dataclass(frozen=True)
class Diagnostic:
    code: str
    message: str
    path: str
    location: Location
    end_location: Location
    fix: Fix | None = None
    noqa_row: int | None = None
    url: str | None = None
    # In a notebook: the 1-based cell (counting every cell) that rows and columns are in.
    cell: int | None = None
    # The rule's own, or the one a finding chose (CKPT002 by FSDP version), before the
    # configuration's `severity` table (applied when results are reported).
    severity: Severity = Severity.ERROR

    @property
    def sort_key(self) -> tuple:
        return (self.path, self.cell or 0, self.location, self.code, self.end_location, self.message)


@dataclass(frozen=True)
class AppliedFix:
    """A fix the fixer wrote, for `--show-fixes` and true counts."""

    code: str
    message: str
    row: int


@dataclass(frozen=True)
class FileResult:
    """Everything one file produced. `fixed_source` is set only when fixes changed the text."""

    path: str
    diagnostics: tuple[Diagnostic, ...] = ()
    applied_fixes: tuple[AppliedFix, ...] = ()
    source: str | None = None
    fixed_source: str | None = None
    internal_errors: tuple[str, ...] = ()
    skipped: bool = False
    # Warnings that do not change the exit code (a file too large to analyse).
    notices: tuple[str, ...] = ()
    # Other files the result rests on (the configs a launch script names), by absolute
    # path: the content digest read, or None for a path looked for and not found.
    inputs: tuple[tuple[str, str | None], ...] = ()
    # Why the declared or chosen target versions rule out a finding (one per finding): not
    # shown, not counted, said in the summary.
    hidden: tuple[str, ...] = ()
    # `--add-noqa`: the lines that got (or had extended) a `# noqa` directive.
    added_noqa: int = 0
    # The keys of the project index the analysis read (`ckptlint.model.project.reads`), when
    # they were recorded: the result stays valid while none of them changes.
    reads: tuple[str, ...] | None = field(default=None, compare=False, repr=False)


@dataclass(frozen=True)
class RunResult:
    files: tuple[FileResult, ...] = ()
    # Messages for problems outside any file (unwritable outputs, files changed underneath us).
    errors: tuple[str, ...] = field(default=())
    # Warnings outside any file that leave the results intact (an unwritable cache).
    warnings: tuple[str, ...] = field(default=())

    @property
    def diagnostics(self) -> list[Diagnostic]:
        return sorted((d for f in self.files for d in f.diagnostics), key=lambda d: d.sort_key)

    @property
    def hidden(self) -> list[str]:
        """Why the target versions hide a finding, one per finding."""
        return [why for f in self.files for why in f.hidden]

    @property
    def internal_errors(self) -> list[str]:
        return [e for f in self.files for e in f.internal_errors]

    @property
    def notices(self) -> list[str]:
        return [*self.warnings, *(n for f in self.files for n in f.notices)]

    @property
    def fixed_count(self) -> int:
        return sum(len(f.applied_fixes) for f in self.files)

    @property
    def added_noqa_count(self) -> int:
        return sum(f.added_noqa for f in self.files)


def fixable(diagnostic: Diagnostic, unsafe: bool) -> bool:
    return diagnostic.fix is not None and (unsafe or diagnostic.fix.applicability is Applicability.SAFE)


# The repository's home, written once: rule pages, SARIF's `informationUri`, and (checked by
# tests/test_release.py) pyproject's `[project.urls]` and the README's pre-commit `repo:`.
REPOSITORY_URL = "https://github.com/ckptlint/ckptlint"
RULE_DOCS_URL = REPOSITORY_URL + "/blob/main/docs/rules/{code}.md"
# Where rule pages are linked instead (a mirror of the docs, a fork): a URL with `{code}`.
DOCS_URL_VARIABLE = "CKPTLINT_DOCS_URL"


class DocsUrlError(ValueError):
    """CKPTLINT_DOCS_URL holds no usable URL template."""


def docs_url_template() -> str:
    """The rule pages' URL template: CKPTLINT_DOCS_URL, else the repository's `docs/rules/`."""
    template = os.environ.get(DOCS_URL_VARIABLE, "").strip()
    if not template:
        return RULE_DOCS_URL
    if "{code}" not in template or not template.startswith(("https://", "http://", "file://")):
        raise DocsUrlError(
            f"{DOCS_URL_VARIABLE}={template!r}: give an http(s):// or file:// URL with `{{code}}` where the rule code goes, "
            f"e.g. {RULE_DOCS_URL}"
        )
    return template


def rule_docs_url(code: str) -> str:
    try:
        return docs_url_template().replace("{code}", code)
    except DocsUrlError:  # the CLI refuses the variable before a run; elsewhere the default
        return RULE_DOCS_URL.replace("{code}", code)


@dataclass(frozen=True)
class PseudoRule:
    """Codes the engine itself emits (parse errors, unreadable files); documented like rules."""

    code: str
    name: str
    doc: str
    fix: Applicability | None = None
    severity: Severity = Severity.ERROR
    targets: tuple = ()  # of VersionRange, as a rule's
    # Off unless selected by its code (or a prefix longer than `CKPT`): `ALL`, the default,
    # leaves it out, as Ruff's nursery rules once were.
    opt_in: bool = False

    def summary(self) -> str:
        return self.doc.split("\n", 1)[0]

    def url(self) -> str:
        return rule_docs_url(self.code)

    def documentation(self) -> str:
        first, _, rest = self.doc.strip().partition("\n")
        return f"# {self.name} ({self.code})\n\n{first}\n\nSeverity: {self.severity.value}.\n{rest}\n"

