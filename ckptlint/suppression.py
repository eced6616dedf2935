"""`# noqa` comments: which codes a comment suppresses. The same syntax in Python, YAML and
shell comments, so the engine and the recipe linter share it.

Also where the directives are in a Python file (`noqa_directives`, for the unused-suppression
report and `--add-noqa`) and the file-level `# ckptlint: noqa: CODE` (`file_level_noqa`)."""

from __future__ import annotations

import io
import re
import tokenize
from dataclasses import dataclass

NOQA = re.compile(r"#\s*noqa(?::\s*(?P<codes>[A-Za-z]+[0-9]+(?:[\s,]+[A-Za-z]+[0-9]+)*))?", re.IGNORECASE)
_CODE = re.compile(r"[A-Za-z]+[0-9]+")
_LINE_BREAK = re.compile(r"\r\n|\r|\n")  # as the tokenizer splits rows
# `# ckptlint: noqa: CKPT001, CKPT002` on a line of its own (as `# ckptlint: skip-file`):
# those codes are not reported anywhere in the file; a bare `# ckptlint: noqa` skips the file.
FILE_NOQA = re.compile(
    r"^[ \t]*#[ \t]*ckptlint:[ \t]*noqa\b(?:[ \t]*:[ \t]*(?P<codes>[A-Za-z]+[0-9]+(?:[ \t,]+[A-Za-z]+[0-9]+)*))?",
    re.MULTILINE | re.IGNORECASE,
)


def written_codes(match: re.Match) -> list[str]:
    """The codes one `# noqa: A, B` directive names, as written."""
    return [code for code in re.split(r"[\s,]+", match.group("codes") or "") if code]


def noqa_codes(comment: str) -> frozenset[str] | None:
    """The codes the `# noqa` directives in `comment` suppress: None for a bare `# noqa`
    (every code), an empty set when there is no directive."""
    codes: set[str] = set()
    for match in NOQA.finditer(comment):
        if match.group("codes") is None:
            return None
        codes.update(code.upper() for code in written_codes(match))
    return frozenset(codes)


def suppresses(line: str, code: str) -> bool:
    codes = noqa_codes(line)
    return codes is None or code in codes


def file_level_noqa(text: str) -> frozenset[str] | None:
    """The codes `# ckptlint: noqa: CODE` lines suppress in the whole file (upper-cased);
    None when a bare `# ckptlint: noqa` skips the file."""
    if "ckptlint" not in text:
        return frozenset()
    codes: set[str] = set()
    for match in FILE_NOQA.finditer(text):
        if match.group("codes") is None:
            return None
        codes.update(code.upper() for code in written_codes(match))
    return frozenset(codes)


def file_level_noqa_rows(text: str) -> list[tuple[int, list[str]]]:
    """Each `# ckptlint: noqa: CODE` line's row and the codes it names, as written."""
    rows = []
    for match in FILE_NOQA.finditer(text):
        rows.append((text.count("\n", 0, match.start()) + 1, written_codes(match)))
    return rows


@dataclass(frozen=True)
class WrittenCode:
    """A code in a `# noqa: ...` directive, as written, and its columns in the line
    (0-based, end exclusive)."""

    code: str
    start: int
    end: int


@dataclass(frozen=True)
class NoqaDirective:
    """One `# noqa` directive in a comment: its row, its columns in the line (0-based, end
    exclusive, from `#` to the last code), the comment's start column and the codes it names
    (empty for a bare `# noqa`)."""

    row: int
    start: int
    end: int
    comment_start: int
    codes: tuple[WrittenCode, ...]

    @property
    def bare(self) -> bool:
        return not self.codes


def noqa_directives(text: str) -> list[NoqaDirective] | None:
    """The `# noqa` directives of Python source, from its comment tokens (a `# noqa` inside a
    string is none); None when the text cannot be tokenized."""
    if "noqa" not in text.lower():
        return []
    directives = []
    try:
        for token in tokenize.generate_tokens(io.StringIO(text).readline):
            if token.type != tokenize.COMMENT:
                continue
            row, column = token.start
            for match in NOQA.finditer(token.string):
                codes = ()
                if match.group("codes") is not None:
                    offset = column + match.start("codes")
                    codes = tuple(
                        WrittenCode(m.group(), offset + m.start(), offset + m.end())
                        for m in _CODE.finditer(match.group("codes"))
                    )
                directives.append(NoqaDirective(row, column + match.start(), column + match.end(), column, codes))
    except (tokenize.TokenError, SyntaxError, ValueError):
        return None
    return directives


def rows_that_take_a_comment(text: str) -> frozenset[int] | None:
    """Rows at whose end a `# noqa` comment can be appended: not inside a multi-line string
    (the comment would be part of the string) and not ending in a line continuation
    (`\\` must end its line); None when the text cannot be tokenized."""
    lines = _LINE_BREAK.split(text)
    blocked: set[int] = set()
    try:
        for token in tokenize.generate_tokens(io.StringIO(text).readline):
            if token.type not in (tokenize.COMMENT, tokenize.NL, tokenize.NEWLINE) and token.end[0] > token.start[0]:
                blocked.update(range(token.start[0], token.end[0]))
    except (tokenize.TokenError, SyntaxError, ValueError):
        return None
    return frozenset(
        row for row, line in enumerate(lines, start=1) if row not in blocked and not line.rstrip().endswith("\\")
    )
