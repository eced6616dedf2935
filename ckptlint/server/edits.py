"""Pure text work for the language server: ckptlint's 1-based character locations as LSP
positions (UTF-16 code units unless negotiated otherwise), the smallest edits that turn one
text into another, and the `# noqa` comment that suppresses a finding."""

from __future__ import annotations

import difflib
import io
import tokenize

from ckptlint.source import LineIndex
from ckptlint.suppression import NOQA
from ckptlint.server.types import EditorPosition, PositionEncoding, TextChange
from ckptlint.types import Location


def code_units(text: str, encoding: PositionEncoding) -> int:
    """How many units of `encoding` the text takes (a character outside the Basic
    Multilingual Plane is two UTF-16 units, four UTF-8 bytes)."""
    if encoding is PositionEncoding.UTF32:
        return len(text)
    if encoding is PositionEncoding.UTF8:
        return len(text.encode("utf-8", "surrogatepass"))
    return len(text.encode("utf-16-le", "surrogatepass")) // 2


def _without_line_break(line: str) -> str:
    return line.rstrip("\r\n")


class DocumentPositions:
    """Converts between ckptlint locations, string offsets and LSP positions of one text.
    Lines break at \\r\\n, \\r and \\n: the same lines for ckptlint, Python and LSP."""

    def __init__(self, text: str, encoding: PositionEncoding = PositionEncoding.UTF16) -> None:
        self.text = text
        self.encoding = encoding
        self.lines = LineIndex(text)

    def position(self, location: Location) -> EditorPosition:
        """The LSP position of a 1-based (row, character column) location, clamped to the
        text (a location past the end of its line is the end of that line)."""
        row = min(max(location.row, 1), len(self.lines.line_starts))
        content = _without_line_break(self.lines.line(row))
        column = min(max(location.column - 1, 0), len(content))
        return EditorPosition(row - 1, code_units(content[:column], self.encoding))

    def position_at(self, offset: int) -> EditorPosition:
        return self.position(self.lines.location(min(max(offset, 0), len(self.text))))

    def offset(self, position: EditorPosition) -> int:
        """The string offset of an LSP position (a `character` inside a surrogate pair or
        past the end of its line is rounded to the next character / the end of the line)."""
        if position.line >= len(self.lines.line_starts):
            return len(self.text)
        row = max(position.line, 0) + 1
        start = self.lines.line_starts[row - 1]
        content = _without_line_break(self.lines.line(row))
        units = 0
        for index, character in enumerate(content):
            if units >= position.character:
                return start + index
            units += code_units(character, self.encoding)
        return start + len(content)

    def location(self, position: EditorPosition) -> Location:
        return self.lines.location(self.offset(position))


def _lines(text: str) -> tuple[list[str], list[int]]:
    """The lines of `text`, each with its line break (split where `LineIndex` splits), and
    the offsets where they start, followed by the end of the text."""
    bounds = sorted({*LineIndex(text).line_starts, len(text)})
    return [text[start:end] for start, end in zip(bounds, bounds[1:])], bounds


def edits_between(old: str, new: str, encoding: PositionEncoding = PositionEncoding.UTF16) -> tuple[TextChange, ...]:
    """The edits (positions in `old`, in order, never overlapping) that turn `old` into
    `new`: one per changed run of lines, trimmed to the characters that differ, so that a
    keyword added to a call is an insertion in that call rather than a new document."""
    (old_lines, old_starts), (new_lines, new_starts) = _lines(old), _lines(new)
    positions = DocumentPositions(old, encoding)
    changes = []
    matcher = difflib.SequenceMatcher(None, old_lines, new_lines, autojunk=False)
    for tag, i1, i2, j1, j2 in matcher.get_opcodes():
        if tag == "equal":
            continue
        start, end = old_starts[i1], old_starts[i2]
        replacement = new[new_starts[j1] : new_starts[j2]]
        replaced = old[start:end]
        prefix = _common_prefix(replaced, replacement)
        suffix = _common_prefix(replaced[prefix:][::-1], replacement[prefix:][::-1], reversed_text=True)
        changes.append(
            TextChange(
                positions.position_at(start + prefix),
                positions.position_at(end - suffix),
                replacement[prefix : len(replacement) - suffix],
            )
        )
    return tuple(changes)


def _common_prefix(a: str, b: str, *, reversed_text: bool = False) -> int:
    """How many leading characters `a` and `b` share, never ending inside one of `a`'s \r\n
    pairs (read backwards when the texts are reversed, to find a common suffix): a position
    between \r and \n is no LSP position, and an edit there would change the wrong text."""
    length = 0
    for x, y in zip(a, b):
        if x != y:
            break
        length += 1
    first, second = ("\n", "\r") if reversed_text else ("\r", "\n")
    if 0 < length < len(a) and a[length - 1] == first and a[length] == second:
        length -= 1
    return length


def with_noqa(text: str, row: int, code: str, *, python: bool) -> str | None:
    """`text` with `code` suppressed on `row`: added to the `# noqa: ...` comment the line
    already ends with, or as a new `  # noqa: CODE` comment after the code (and after any
    other comment). None where no comment can be added to that line: it ends inside a
    string spanning lines, or with a backslash continuation."""
    index = LineIndex(text)
    if not 1 <= row <= len(index.line_starts):
        return None
    line = index.line(row)
    content = _without_line_break(line)
    if content.rstrip().endswith("\\"):
        return None
    comment_start = _comment_start(text, row, content) if python else _comment_by_pattern(content)
    if comment_start is False:
        return None
    start = index.line_starts[row - 1]
    if comment_start is not None:
        comment = content[comment_start:]
        for match in NOQA.finditer(comment):
            if match.group("codes") is None:
                continue  # a bare `# noqa` suppresses everything already
            codes = match.group("codes").upper().replace(",", " ").split()
            if code in codes:
                return text
            at = start + comment_start + match.end("codes")
            return text[:at] + f", {code}" + text[at:]
    at = start + len(content.rstrip())
    return text[:at] + f"  # noqa: {code}" + text[start + len(content) :]


def _comment_start(text: str, row: int, content: str) -> int | None | bool:
    """Where the comment on `row` starts (a column), None without one, False when the
    line ends inside a token that spans lines. Found with Python's tokenizer, so a `#` in
    a string is not a comment; on text that does not tokenize (being typed), by pattern."""
    try:
        tokens = list(tokenize.generate_tokens(io.StringIO(text).readline))
    except (tokenize.TokenError, SyntaxError, IndentationError):
        return _comment_by_pattern(content)
    for token in tokens:
        (start_row, start_column), (end_row, _) = token.start, token.end
        if start_row <= row < end_row and token.type not in (tokenize.NEWLINE, tokenize.NL):
            return False
        if token.type == tokenize.COMMENT and start_row == row:
            return start_column
    return None


def _comment_by_pattern(content: str) -> int | None:
    """The first `#` of a line that also holds a `# noqa`, else the last `#` that follows
    whitespace or starts the line (YAML and shell comments; Python being typed)."""
    match = NOQA.search(content)
    if match is not None:
        return match.start()
    for column in range(len(content) - 1, -1, -1):
        if content[column] == "#" and (column == 0 or content[column - 1] in " \t"):
            return column
    return None
