"""Launch scripts: the commands of a shell script that start Python training, with every word's
position.

The tokenizer follows POSIX shell quoting (single quotes, double quotes with backslash escapes,
backslash-newline continuations, `#` comments at the start of a word) and splits commands at
newlines, `;`, `&&`, `||`, `|` and `&`. Words holding a parameter expansion (`$LR`, `${CFG}`)
are resolved from plain `NAME=value` assignments earlier in the script; what stays unknown
(command substitution, variables from the environment) is marked so, and the rules stay
silent about it. Nothing is executed.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass

from ckptlint.model.syntax.recipe_documents import Span
from ckptlint.types import Location

_LITERAL_DOLLAR = "\1"  # an escaped `$`, kept out of parameter expansion
_OPERATORS = ("&&", "||", ";;", ";", "|", "&", "(", ")")
_REDIRECT = re.compile(r"(&>>?|\d*(?:>>|>\||<>|<<<|<<-?|>&|<&|>|<))(\d+-?|-)?")
_ASSIGNMENT = re.compile(r"^([A-Za-z_][A-Za-z0-9_]*)=(.*)$", re.DOTALL)
_PARAMETER = re.compile(r"\$(?:\{([A-Za-z_][A-Za-z0-9_]*)\}|([A-Za-z_][A-Za-z0-9_]*))")
# Words a command line may start with that run the rest as the command.
_PREFIX_COMMANDS = frozenset({"exec", "nohup", "time", "env", "command", "srun", "sudo", "stdbuf", "nice"})


@dataclass(frozen=True)
class Word:
    """One shell word: its value after quote removal (None when it depends on something not
    known statically), and where it is written."""

    value: str | None
    span: Span
    # Expansions were resolved from the script's own assignments (the value is as written
    # otherwise).
    expanded: bool = False


@dataclass(frozen=True)
class Command:
    """A simple command: its variable assignments and words."""

    assignments: tuple[tuple[str, Word], ...]
    words: tuple[Word, ...]

    @property
    def line(self) -> int:
        return self.words[0].span.start.row if self.words else self.assignments[0][1].span.start.row


class _Raw:
    """A word as scanned: text with quotes removed, whether parts of it were quoted (quoted
    parts are not expanded by `$` in single quotes), and its span."""

    def __init__(self, start: Location) -> None:
        self.start = start
        self.parts: list[tuple[str, bool]] = []  # (text, expandable)
        self.end = start

    def add(self, text: str, expandable: bool) -> None:
        if self.parts and self.parts[-1][1] == expandable and "\0" not in self.parts[-1][0] + text:
            self.parts[-1] = (self.parts[-1][0] + text, expandable)
        else:
            self.parts.append((text, expandable))

    def assigned_name(self) -> str | None:
        """`NAME` for a word `NAME=value`."""
        match = _ASSIGNMENT.match(self.parts[0][0]) if self.parts else None
        return match.group(1) if match is not None else None


def _scan(text: str) -> Iterator[_Raw | str]:
    """Words (`_Raw`) and separators (an operator string, or "\\n")."""
    row, column = 1, 1
    i, n = 0, len(text)
    word: _Raw | None = None

    def location() -> Location:
        return Location(row, column)

    def advance(count: int = 1) -> None:
        nonlocal i, row, column
        for _ in range(count):
            if i < n and text[i] == "\n":
                row, column = row + 1, 1
            else:
                column += 1
            i += 1

    skip_next = False
    heredoc: list[str | None] = [None, None]  # the delimiter (or "pending"), the operator

    def finish() -> _Raw | None:
        nonlocal word, skip_next
        finished, word = word, None
        if finished is not None:
            finished.end = location()
            if skip_next:
                skip_next = False
                if heredoc[0] == "pending":
                    heredoc[0] = "".join(part for part, _ in finished.parts)
                return None
        return finished

    while i < n:
        char = text[i]
        if char == "\\" and i + 1 < n and text[i + 1] == "\n":
            advance(2)  # a continuation: no separator
            continue
        if char in " \t\r":
            if (done := finish()) is not None:
                yield done
            advance()
            continue
        if char == "\n":
            if (done := finish()) is not None:
                yield done
            skip_next = False
            yield "\n"
            advance()
            if heredoc[0] not in (None, "pending"):
                # A here-document: its lines are data, up to the delimiter line.
                delimiter, strip_tabs = heredoc[0], heredoc[1].endswith("-")
                while i < n:
                    end = text.find("\n", i)
                    end = n if end < 0 else end
                    line = text[i:end]
                    advance(end + 1 - i if end < n else end - i)
                    if (line.lstrip("\t") if strip_tabs else line).rstrip("\r") == delimiter:
                        break
            heredoc[:] = [None, None]
            continue
        if char == "#" and word is None:
            while i < n and text[i] != "\n":
                advance()
            continue
        redirect = _REDIRECT.match(text, i)
        if redirect is not None and (word is None or all(part.isdigit() for part, _ in word.parts)):
            # `> log`, `2>&1`, `&> out`: not words of the command; a target word follows
            # unless the operator names a descriptor.
            word = None
            advance(redirect.end() - i)
            if not redirect.group(2):
                skip_next = True
            if redirect.group(1).lstrip("0123456789") in ("<<", "<<-"):
                heredoc[:] = ["pending", redirect.group(1)]
            continue
        operator = next((op for op in _OPERATORS if text.startswith(op, i)), None)
        if operator is not None and not (operator in "()" and word is not None):
            if (done := finish()) is not None:
                yield done
            yield operator
            advance(len(operator))
            continue
        if word is None:
            word = _Raw(location())
        if char == "'":
            end = text.find("'", i + 1)
            end = n if end < 0 else end
            word.add(text[i + 1 : end], False)
            advance(end + 1 - i)
        elif char == '"':
            advance()
            chunk = []
            while i < n and text[i] != '"':
                if text[i] == "\\" and i + 1 < n and text[i + 1] in '$`"\\\n':
                    if text[i + 1] != "\n":
                        chunk.append(_LITERAL_DOLLAR if text[i + 1] == "$" else text[i + 1])
                    advance(2)
                elif text.startswith("$(", i) or text[i] == "`":
                    chunk.append("\0")  # a command substitution: its output is not known
                    advance()
                else:
                    chunk.append(text[i])
                    advance()
            advance()
            word.add("".join(chunk), True)
        elif char == "\\" and i + 1 < n:
            word.add(text[i + 1], False)
            advance(2)
        elif char == "$" and text.startswith("$(", i) or char == "`":
            # A command substitution: its output is not known; keep its text for display.
            closing = ")" if char == "$" else "`"
            depth, start = 0, i
            while i < n:
                if text[i] == "(" and closing == ")":
                    depth += 1
                elif text[i] == closing and (closing == "`" and i > start or depth == 1):
                    advance()
                    break
                elif text[i] == ")" and closing == ")":
                    depth -= 1
                advance()
            word.add("\0" + text[start:i], True)  # \0 marks "not known"
        else:
            word.add(char, True)
            advance()
    if (done := finish()) is not None:
        yield done


def _expand(raw: _Raw, variables: dict[str, str | None]) -> Word:
    span = Span(raw.start, raw.end)
    pieces = []
    expanded = False
    for text, expandable in raw.parts:
        if "\0" in text:
            return Word(None, span)
        if expandable and "$" in text:
            unknown = False

            def substitute(match: re.Match) -> str:
                nonlocal unknown
                value = variables.get(match.group(1) or match.group(2))
                if value is None:
                    unknown = True
                    return ""
                return value

            text = _PARAMETER.sub(substitute, text)
            if unknown:
                return Word(None, span)
            expanded = True
        pieces.append(text)
    return Word("".join(pieces).replace(_LITERAL_DOLLAR, "$"), span, expanded)


def parse_script(text: str) -> list[Command]:
    """The simple commands of a shell script, in order."""
    commands: list[Command] = []
    variables: dict[str, str | None] = {}
    current: list[_Raw] = []

    def close() -> None:
        if not current:
            return
        assignments: list[tuple[str, Word]] = []
        words: list[Word] = []
        for raw in current:
            word = _expand(raw, variables)
            name = raw.assigned_name() if not words else None
            if name is not None:
                value = word.value.split("=", 1)[1] if word.value is not None else None
                assignments.append((name, Word(value, word.span)))
            else:
                words.append(word)
        if words and words[0].value == "export":
            words = words[1:]
            for word in words:
                match = _ASSIGNMENT.match(word.value or "")
                if match is not None:
                    assignments.append((match.group(1), Word(match.group(2), word.span)))
            words = []
        if not words:
            for name, word in assignments:  # `CFG=fsdp.yaml` on its own line sets a variable
                variables[name] = word.value
        commands.append(Command(tuple(assignments), tuple(words)))
        current.clear()

    for item in _scan(text):
        if isinstance(item, str):
            close()
            if item in ("(", ")"):
                continue
        else:
            current.append(item)
    close()
    return [command for command in commands if command.words]


def command_words(command: Command) -> tuple[Word, ...]:
    """The words of the program that runs: `nohup`, `env A=b`, `srun ...`-style prefixes removed."""
    words = list(command.words)
    while words and words[0].value in _PREFIX_COMMANDS:
        prefix = words.pop(0).value
        if prefix in ("env", "sudo"):
            while words and words[0].value is not None and _ASSIGNMENT.match(words[0].value):
                words.pop(0)
        elif prefix == "srun":
            while words and (words[0].value or "").startswith("-"):
                flag = words.pop(0).value or ""
                if "=" not in flag and len(flag) == 2 and words:
                    words.pop(0)  # `-n 8`
    return tuple(words)
