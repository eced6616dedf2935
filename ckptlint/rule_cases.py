"""A rule's cases, the small files beside it (`rules/<slug>/cases/*.py`) that the case driver
(`tests/test_rule_cases.py`) lints and the rule page lists by title; and the `# expect: CODE`
markers they share with the projects under `fixtures/`.

A case file is Python, read as text and never imported:

    # A torchvision ResNet's stage: BatchNorm in every block.
    # ckptlint-case: column=5
    from torch.utils.checkpoint import checkpoint
    from torchvision.models import resnet50

    backbone = resnet50(weights=None)
    x = checkpoint(backbone.layer3, x, use_reentrant=False)  # expect: CKPT010

- Line 1 is its title: one comment line saying what the case shows.
- The comment lines after it, before the code, are notes, or directives saying how the case
  is run, one per line: `# ckptlint-case: target-version=PKG=VER` (one line per package),
  `# ckptlint-case: column=N` (the 1-based column where the case's one finding starts),
  `# ckptlint-case: message-contains=TEXT` (a piece of its message: the rest of the line).
- `# expect: CODE` ends each line where a finding must start (several: `CODE, CODE`); a case
  without markers must produce no finding.
- `NAME.py.fixed` beside `NAME.py` is the whole file after its fix (`--unsafe-fixes`). A case
  whose finding offers a fix has one, a case whose finding offers none has none; whether the
  fix is safe or unsafe is the rule's `fix`, which every fix the rule offers carries.

The driver lints a case as `example.py` of a project of its own (nothing else in it), with
only its rule selected and the installed packages' versions ignored.
"""

from __future__ import annotations

import io
import re
import sys
import tokenize
from dataclasses import dataclass
from pathlib import Path

MARKER = re.compile(r"#\s*expect:\s*(?P<codes>[A-Z]+[0-9]+(?:\s*,\s*[A-Z]+[0-9]+)*)\s*$")
DIRECTIVE = "# ckptlint-case:"
FIXED_SUFFIX = ".fixed"
CASES_DIRECTORY = "cases"


@dataclass(frozen=True)
class Marker:
    """An `# expect:` comment: its row and the codes it names (none: malformed)."""

    row: int
    comment: str
    codes: tuple[str, ...]


def marked_codes(line: str) -> tuple[str, ...]:
    """The codes of the marker ending `line` (a comment, or a line of a recipe)."""
    match = MARKER.search(line)
    return tuple(re.split(r"\s*,\s*", match.group("codes"))) if match else ()


def python_markers(text: str) -> list[Marker]:
    """The `# expect:` comments of Python source, by the tokenizer (a string that looks like
    one is not)."""
    return [
        Marker(token.start[0], token.string, marked_codes(token.string))
        for token in tokenize.generate_tokens(io.StringIO(text).readline)
        if token.type == tokenize.COMMENT and "expect:" in token.string
    ]


class CaseError(ValueError):
    """A case file that does not follow the convention above."""


@dataclass(frozen=True)
class RuleCase:
    """One case file of a rule, as read."""

    path: Path
    title: str
    source: str
    expected: tuple[tuple[int, str], ...]  # (row, code) of each finding, in order
    target_versions: tuple[tuple[str, str], ...] = ()
    column: int | None = None
    message_contains: str | None = None

    @property
    def name(self) -> str:
        return self.path.stem

    @property
    def fixed_path(self) -> Path:
        return self.path.with_name(self.path.name + FIXED_SUFFIX)

    @property
    def fixed_source(self) -> str | None:
        """The whole file after its fix; None when the case's finding has no fix."""
        return self.fixed_path.read_text(encoding="utf-8") if self.fixed_path.is_file() else None


def read_case(path: Path) -> RuleCase:
    source = path.read_text(encoding="utf-8")
    lines = source.splitlines()
    if not lines or not lines[0].startswith("# ") or lines[0].startswith(DIRECTIVE):
        raise CaseError(f"{path}: line 1 must be the case's title, a comment")
    options: dict[str, object] = {}
    versions: dict[str, str] = {}
    for number, line in enumerate(lines[1:], start=2):
        if not line.startswith("#"):
            break
        if not line.startswith(DIRECTIVE):
            continue
        key, equals, value = line[len(DIRECTIVE) :].strip().partition("=")
        if not equals:
            raise CaseError(f"{path}:{number}: a directive is KEY=VALUE")
        if key == "target-version":
            package, equals, version = value.partition("=")
            if not equals:
                raise CaseError(f"{path}:{number}: target-version=PKG=VER")
            versions[package] = version
        elif key == "column" and value.isdigit():
            options["column"] = int(value)
        elif key == "message-contains" and value:
            options["message_contains"] = value
        else:
            raise CaseError(f"{path}:{number}: unknown directive {key}={value!r}")
    expected = []
    for marker in python_markers(source):
        if not marker.codes:
            raise CaseError(f"{path}:{marker.row}: malformed marker {marker.comment!r}")
        expected += [(marker.row, code) for code in marker.codes]
    if options and len(expected) != 1:
        raise CaseError(f"{path}: column= and message-contains= are for a case with one finding")
    return RuleCase(
        path=path,
        title=lines[0][2:].strip(),
        source=source,
        expected=tuple(expected),
        target_versions=tuple(sorted(versions.items())),
        **options,
    )


def rule_folder(rule: type) -> Path:
    """The folder of a rule: the package its class is defined in (`rules/<slug>/`)."""
    return Path(sys.modules[rule.__module__].__file__).parent


def rule_cases(rule: type) -> tuple[RuleCase, ...]:
    """Every case of a rule, by file name."""
    directory = rule_folder(rule) / CASES_DIRECTORY
    return tuple(read_case(path) for path in sorted(directory.glob("*.py")))


def cases_section(rule: type) -> str:
    """The rule page's list of cases: each case's title and file, those reported first."""
    cases = rule_cases(rule)
    if not cases:
        return ""
    folder = f"rules/{rule_folder(rule).name}/{CASES_DIRECTORY}/"
    reported = [case for case in cases if case.expected]
    quiet = [case for case in cases if not case.expected]
    lines = ["## Cases", f"Each case is a file of `{folder}`; a fixed one has its fixed code beside it (`NAME.py.fixed`).", ""]
    for heading, group in (("Reported:", reported), ("Not reported:", quiet)):
        if group:
            lines.append(heading)
            lines += [f"- {case.title} (`{case.path.name}`{', fixed' if case.fixed_path.is_file() else ''})" for case in group]
            lines.append("")
    return "\n".join(lines).rstrip() + "\n"
