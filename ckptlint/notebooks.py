"""Jupyter notebooks (`.ipynb`, nbformat 4) as Python text, and back.

The code cells are joined into one Python text (so an import in cell 1 resolves a call in
cell 3), each followed by a boundary comment line. IPython escapes (`%magic`, `!shell`,
`obj?`, `x = !cmd`) become a `pass` at the same indentation: every other line keeps its row
and columns, and a row maps back to (cell, row inside the cell). A cell whose first line is
a cell magic that does not run Python (`%%bash`, `%%writefile`, ...) is left out.

Fixed Python text goes back into the cells it came from: the escapes are restored, and only
the JSON value of a changed cell's `source` is rewritten, in the form it had (a list of
lines or one string, the list's indentation, ASCII escaping). Outputs, execution counts,
metadata, key order and the file's whitespace stay byte for byte: the standard library's
`json` only finds the values and their offsets (nbformat would re-serialise the whole file).
"""

from __future__ import annotations

import ast
import dataclasses
import difflib
import json
import re
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from json.decoder import scanstring
from pathlib import Path

from ckptlint.types import Diagnostic, Edit, Location

NOTEBOOK_SUFFIX = ".ipynb"
# Ends each cell's code in the joined text; never a line of a cell (checked when mapping back).
CELL_BOUNDARY = "# ckptlint: end of notebook cell"
# Stands for an IPython escape line, after its indentation.
ESCAPE_PLACEHOLDER = "pass  # ckptlint: IPython escape"
# Cell magics whose body is Python (IPython runs it, timed, captured or profiled).
PYTHON_CELL_MAGICS = frozenset({"time", "timeit", "capture", "prun", "debug", "python", "python3"})

_DECODER = json.JSONDecoder()
_WHITESPACE = re.compile(r"[ \t\n\r]*")
_HELP = re.compile(r"(?:[\w.]+\?\??|\?\??[\w.]*)[ \t]*")
_ASSIGNED_ESCAPE = re.compile(r"[\w.]+(?:[ \t]*,[ \t]*[\w.]+)*[ \t]*=[ \t]*[%!]")
_LINE_END = re.compile(r"\r\n|\r|\n")
# IPython's automagic (on by default): a line magic written without `%` (`pip install
# peft`, `cd data`, `ls -la`) runs as the magic unless what follows its name starts like
# Python (IPython's AssignmentChecker / PythonOpsChecker: `pip = 3`, `cd(x)`, `ls + 1`;
# `env.get(k)` names no magic).
_AUTOMAGIC = re.compile(
    r"(?:pip|conda|mamba|cd|pwd|env|set_env|load_ext|reload_ext|autoreload|matplotlib|timeit|run|pylab|"
    r"ls|mkdir|rmdir|cat|cp|mv|rm|who|whos|history|store|bookmark|pinfo|killbgscripts|sx|system)"
    r"[ \t]+(?![=(\[,:)\]}+*/%<>!&|^~@]|(?:if|else|for|in|and|or|is|not)\b)\S"
)


def is_notebook_path(path: Path | str) -> bool:
    return str(path).lower().endswith(NOTEBOOK_SUFFIX)


class NotebookError(Exception):
    """The file is not a notebook ckptlint can read: `row`/`column` in the file, `cell`
    (1-based) when one cell is at fault."""

    def __init__(self, message: str, row: int = 1, column: int = 1, cell: int | None = None) -> None:
        super().__init__(message)
        self.row, self.column, self.cell = row, column, cell


@dataclass(frozen=True)
class CodeCell:
    number: int  # 1-based, counting every cell (markdown and raw too)
    source: str  # the cell's text as stored
    code: str  # its code as linted: escapes neutralised, ending with a newline
    first_row: int  # the row of its first line in the joined Python text
    escapes: tuple[str, ...]  # the lines replaced by the placeholder, in order, as written
    span: tuple[int, int]  # where its `source` value is in the file's text
    as_lines: bool  # `source` stored as a list of lines (else one string)


@dataclass(frozen=True)
class Notebook:
    text: str  # the file, as read
    cells: tuple[CodeCell, ...]
    python_text: str
    left_out: frozenset[int] = frozenset()  # code cells not linted: see `read_notebook`

    def locate(self, location: Location) -> tuple[int | None, Location]:
        """The cell holding a row of the joined text, and the location inside that cell."""
        cell = self._cell_at(location.row)
        if cell is None:
            return None, location
        return cell.number, Location(location.row - cell.first_row + 1, location.column)

    def _cell_at(self, row: int) -> CodeCell | None:
        found = None
        for cell in self.cells:
            if cell.first_row > row:
                break
            found = cell
        return found

    def in_cells(self, diagnostic: Diagnostic) -> Diagnostic:
        """The diagnostic with its locations, fix edits and noqa row inside its cell."""
        cell = self._cell_at(diagnostic.location.row)
        if cell is None:
            return diagnostic
        shift = cell.first_row - 1

        def moved(location: Location) -> Location:
            return Location(max(location.row - shift, 1), location.column)

        fix = diagnostic.fix
        if fix is not None:
            edits = tuple(Edit(moved(e.location), moved(e.end_location), e.content) for e in fix.edits)
            fix = dataclasses.replace(fix, edits=edits)
        return dataclasses.replace(
            diagnostic,
            cell=cell.number,
            location=moved(diagnostic.location),
            end_location=moved(diagnostic.end_location),
            fix=fix,
            noqa_row=None if diagnostic.noqa_row is None else max(diagnostic.noqa_row - shift, 1),
        )

    def with_python_text(self, fixed: str) -> str:
        """The file with each code cell's `source` replaced by its part of `fixed` (the
        joined text after fixes); cells whose code did not change keep their bytes."""
        parts = _split_cells(fixed, len(self.cells))
        pieces: list[str] = []
        position = 0
        ascii_only = _writes_ascii_only(self.text)
        for cell, part in zip(self.cells, parts):
            new_source = _restore_escapes(cell, part)
            if new_source == cell.source:
                continue
            start, end = cell.span
            pieces += [self.text[position:start], _render_source(self.text[start:end], new_source, cell.as_lines, ascii_only)]
            position = end
        return "".join(pieces) + self.text[position:]

    def cell_sources(self) -> dict[int, str]:
        return {cell.number: cell.source for cell in self.cells}

    def cells_that_do_not_parse(self) -> dict[int, SyntaxError]:
        """The cells that are not Python on their own, with CPython's error (its rows in the
        cell). Jupyter runs each cell alone, so one broken cell need not hide the others'
        findings: `read_notebook(text, leave_out=...)` lints the rest."""
        try:
            ast.parse(self.python_text)
            return {}
        except (SyntaxError, ValueError, RecursionError, MemoryError):
            pass
        broken: dict[int, SyntaxError] = {}
        for cell in self.cells:
            try:
                ast.parse(cell.code)
            except SyntaxError as error:
                broken[cell.number] = error
            except (ValueError, RecursionError, MemoryError):
                pass  # the engine says what it says about the whole text
        return broken


def top_level_await_only(error: SyntaxError, code: str) -> bool:
    """Whether a cell fails only for an `await` at top level, which IPython runs."""
    try:
        compile(code, "<cell>", "exec", flags=ast.PyCF_ONLY_AST | ast.PyCF_ALLOW_TOP_LEVEL_AWAIT)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return False
    return True


def read_notebook(text: str, leave_out: frozenset[int] = frozenset()) -> Notebook:
    """Parse a notebook's text; NotebookError says what makes it unreadable. The cells
    numbered in `leave_out` are not linted (nor written to)."""
    if not text.strip():
        return Notebook(text, (), "", leave_out)  # an empty file, as Jupyter creates none but editors do: no cells
    try:
        document = json.loads(text)
    except json.JSONDecodeError as error:
        raise NotebookError(f"invalid notebook JSON: {error.msg}", error.lineno, error.colno) from None
    except RecursionError:
        raise NotebookError("invalid notebook JSON: nested too deeply") from None
    if not isinstance(document, dict):
        raise NotebookError("not a Jupyter notebook: the file's JSON is not an object")
    version = document.get("nbformat")
    if not isinstance(document.get("cells"), list) or (version is not None and version != 4):
        found = f"nbformat {version}" if version is not None else "no `cells` list"
        raise NotebookError(f"not an nbformat 4 notebook ({found}); convert it with `jupyter nbconvert --to notebook`")
    spans = dict(_source_spans(text))
    cells: list[CodeCell] = []
    parts: list[str] = []
    row = 1
    lints_python = _is_python_notebook(document)
    for number, cell in enumerate(document["cells"], start=1):
        if not isinstance(cell, dict):
            raise NotebookError(f"cell {number} is not a JSON object", *_row_column(text, spans, number), cell=number)
        if "source" not in cell:
            raise NotebookError(f"cell {number} has no `source`", *_row_column(text, spans, number), cell=number)
        source = cell["source"]
        as_lines = isinstance(source, list)
        if as_lines and all(isinstance(line, str) for line in source):
            source = "".join(source)
        elif not isinstance(source, str):
            raise NotebookError(
                f"cell {number}: `source` is neither a string nor a list of strings", *_row_column(text, spans, number), cell=number
            )
        if cell.get("cell_type") != "code" or not lints_python or _runs_other_language(source) or number in leave_out:
            continue
        code, escapes = _neutralise_escapes(source)
        if code and not code.endswith(("\n", "\r")):
            code += "\n"
        cells.append(CodeCell(number, source, code, row, escapes, spans[number], as_lines))
        parts += [code, CELL_BOUNDARY, "\n"]
        row += len(_LINE_END.findall(code)) + 1
    return Notebook(text, tuple(cells), "".join(parts), leave_out)


def _is_python_notebook(document: dict) -> bool:
    """Whether the notebook's kernel runs Python (one without that metadata is taken to)."""
    metadata = document.get("metadata")
    if not isinstance(metadata, dict):
        return True
    for section, key in (("language_info", "name"), ("kernelspec", "language")):
        value = metadata.get(section, {}).get(key) if isinstance(metadata.get(section), dict) else None
        if isinstance(value, str):
            return value.lower() == "python"
    return True


def _runs_other_language(source: str) -> bool:
    """A cell magic on the first line that does not run its body as Python (`%%bash`)."""
    first = source.lstrip(" \t\r\n").split("\n", 1)[0]
    if not first.startswith("%%"):
        return False
    name = first[2:].split(None, 1)[0] if first[2:].strip() else ""
    return name not in PYTHON_CELL_MAGICS


def _neutralise_escapes(source: str) -> tuple[str, tuple[str, ...]]:
    """The cell's code with each IPython escape line replaced by the placeholder, and the
    lines replaced. A line inside brackets, a triple-quoted string or after a backslash
    continues Python code (`% b` there is the modulo operator) and is kept."""
    lines = source.splitlines(keepends=True)
    escapes: list[str] = []
    out: list[str] = []
    depth, quote, continued = 0, None, False
    escape_indent: str | None = None  # set while an IPython escape goes on (its line ended with `\`)
    for line in lines:
        body = line.rstrip("\r\n")
        stripped = body.lstrip(" \t")
        if escape_indent is None and depth == 0 and quote is None and not continued and _is_escape(stripped):
            escape_indent = body[: len(body) - len(stripped)]
        if escape_indent is not None:  # `!curl URL \` and its continuation lines: one shell command
            escapes.append(line)
            out.append(escape_indent + ESCAPE_PLACEHOLDER + line[len(body):])
            escape_indent = escape_indent if body.endswith("\\") else None
            continue
        out.append(line)
        depth, quote, continued = _scan_line(body, depth, quote)
    return "".join(out), tuple(escapes)


def _is_escape(stripped: str) -> bool:
    return (
        stripped.startswith(("%", "!", "?"))
        or (stripped.endswith("?") and _HELP.fullmatch(stripped) is not None)
        or _ASSIGNED_ESCAPE.match(stripped) is not None
        or _AUTOMAGIC.match(stripped) is not None
    )


def _scan_line(body: str, depth: int, quote: str | None) -> tuple[int, str | None, bool]:
    """Bracket depth and open triple-quoted string after a line, and whether it ends with
    a backslash continuation (comments and one-line strings skipped)."""
    index, length = 0, len(body)
    while index < length:
        char = body[index]
        if quote is not None:
            if char == "\\":
                index += 2
            elif body.startswith(quote, index):
                index, quote = index + 3, None
            else:
                index += 1
            continue
        if char == "#":
            return depth, None, False
        if char in "\"'":
            if body.startswith(char * 3, index):
                quote, index = char * 3, index + 3
                continue
            index += 1
            while index < length and body[index] != char:
                index += 2 if body[index] == "\\" else 1
            index += 1
            continue
        if char in "([{":
            depth += 1
        elif char in ")]}":
            depth = max(depth - 1, 0)
        index += 1
    return depth, quote, quote is None and body.endswith("\\")


# --- positions in the file's JSON ---------------------------------------------------------


def _members(text: str, start: int) -> Iterator[tuple[str, int, int]]:
    """(key, value start, value end) of the object at `start` (text known to be valid JSON)."""
    index = _WHITESPACE.match(text, start + 1).end()
    if text[index] == "}":
        return
    while True:
        key, index = scanstring(text, index + 1)
        index = _WHITESPACE.match(text, index).end() + 1  # past ':'
        index = _WHITESPACE.match(text, index).end()
        _, end = _DECODER.raw_decode(text, index)
        yield key, index, end
        index = _WHITESPACE.match(text, end).end()
        if text[index] == "}":
            return
        index = _WHITESPACE.match(text, index + 1).end()


def _items(text: str, start: int) -> Iterator[tuple[int, int]]:
    """(start, end) of each item of the array at `start`."""
    index = _WHITESPACE.match(text, start + 1).end()
    if text[index] == "]":
        return
    while True:
        _, end = _DECODER.raw_decode(text, index)
        yield index, end
        index = _WHITESPACE.match(text, end).end()
        if text[index] == "]":
            return
        index = _WHITESPACE.match(text, index + 1).end()


def _source_spans(text: str) -> Iterable[tuple[int, tuple[int, int]]]:
    """(cell number, span of its `source` value, or of the cell when it has none)."""
    start = _WHITESPACE.match(text).end()
    cells = [(begin, end) for key, begin, end in _members(text, start) if key == "cells"]
    if not cells:
        return
    for number, (begin, end) in enumerate(_items(text, cells[-1][0]), start=1):
        sources = [(b, e) for key, b, e in _members(text, begin) if key == "source"] if text[begin] == "{" else []
        yield number, sources[-1] if sources else (begin, end)


def _row_column(text: str, spans: dict[int, tuple[int, int]], number: int) -> tuple[int, int]:
    offset = spans.get(number, (0, 0))[0]
    row = len(_LINE_END.findall(text, 0, offset)) + 1
    line_start = max(text.rfind("\n", 0, offset), text.rfind("\r", 0, offset)) + 1
    return row, offset - line_start + 1


# --- writing cells back -----------------------------------------------------------------------


def _split_cells(fixed: str, count: int) -> list[str]:
    parts: list[str] = []
    current: list[str] = []
    for line in fixed.splitlines(keepends=True):
        if line.rstrip("\r\n") == CELL_BOUNDARY:
            parts.append("".join(current))
            current = []
        else:
            current.append(line)
    if len(parts) != count or "".join(current):
        raise NotebookError("the fixed code no longer separates into the notebook's cells")
    return parts


def _restore_escapes(cell: CodeCell, code: str) -> str:
    lines = code.splitlines(keepends=True)
    escapes = iter(cell.escapes)
    restored = []
    for line in lines:
        if line.rstrip("\r\n").lstrip(" \t") == ESCAPE_PLACEHOLDER:
            original = next(escapes, None)
            if original is None:
                raise NotebookError(f"cell {cell.number}: the fixed code does not match its IPython escapes")
            restored.append(original.rstrip("\r\n") + line[len(line.rstrip("\r\n")):])
        else:
            restored.append(line)
    if next(escapes, None) is not None:
        raise NotebookError(f"cell {cell.number}: the fixed code lost one of its IPython escapes")
    text = "".join(restored)
    # The newline added after a cell's last line when it was joined is not the cell's.
    if not cell.source.endswith(("\n", "\r")) and text.endswith("\n"):
        text = text[:-1]
    return text


def _writes_ascii_only(text: str) -> bool:
    """Whether the file escapes non-ASCII characters (`\\u00e9`) rather than writing them."""
    return text.isascii() and re.search(r"\\u(?:00[89a-fA-F]|0[1-9a-fA-F]|[1-9a-fA-F])", text) is not None


def _render_source(original: str, source: str, as_lines: bool, ascii_only: bool) -> str:
    """The JSON for a cell's new `source`, in the form of the value it replaces."""
    if not as_lines:
        return json.dumps(source, ensure_ascii=ascii_only)
    items = [json.dumps(line, ensure_ascii=ascii_only) for line in source.splitlines(keepends=True)]
    spans = list(_items(original, 0))
    if not spans:
        return json.dumps(source.splitlines(keepends=True), ensure_ascii=ascii_only)
    opening = original[1 : spans[0][0]]
    closing = original[spans[-1][1] : len(original) - 1]
    separator = original[spans[0][1] : spans[1][0]] if len(spans) > 1 else ("," + opening if "\n" in opening else ", ")
    return "[" + opening + separator.join(items) + closing + "]"


_PLACE = re.compile(r"(?P<path>[^\s`'\"(),:]+\.ipynb):(?P<row>\d+)")


def places_in_cells(message: str, notebook_at: Callable[[str], Notebook | None]) -> str:
    """A message's `nb.ipynb:12` (a row of the joined code, as the project's facts record
    places) as `nb.ipynb:cell 3:2`; `notebook_at` reads a notebook by its path in the message."""

    def in_cell(match: re.Match) -> str:
        notebook = notebook_at(match["path"])
        cell, location = notebook.locate(Location(int(match["row"]), 1)) if notebook is not None else (None, None)
        return match[0] if cell is None else f"{match['path']}:cell {cell}:{location.row}"

    return _PLACE.sub(in_cell, message) if ".ipynb:" in message else message


def cell_diff(path: str, old_text: str, new_text: str) -> str:
    """A unified diff of each code cell that changed, headed `a/PATH:cell N`."""
    old, new = read_notebook(old_text).cell_sources(), read_notebook(new_text).cell_sources()
    chunks = []
    for number in sorted(old):
        if new.get(number, old[number]) == old[number]:
            continue
        lines = difflib.unified_diff(
            old[number].splitlines(keepends=True),
            new[number].splitlines(keepends=True),
            fromfile=f"a/{path}:cell {number}",
            tofile=f"b/{path}:cell {number}",
        )
        chunks.extend(line if line.endswith(("\n", "\r")) else line + "\n\\ No newline at end of file\n" for line in lines)
    return "".join(chunks)
