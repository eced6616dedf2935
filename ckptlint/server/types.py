"""Values the language server computes from text before it speaks LSP: positions in the
client's units and the edits that turn one text into another."""

from __future__ import annotations

import enum
from dataclasses import dataclass

from ckptlint.types import Diagnostic


class PositionEncoding(str, enum.Enum):
    """What an LSP `character` counts (negotiated at `initialize`; UTF-16 unless the client
    offers another)."""

    UTF16 = "utf-16"
    UTF8 = "utf-8"
    UTF32 = "utf-32"


@dataclass(frozen=True, order=True)
class EditorPosition:
    """An LSP position: 0-based line, 0-based `character` in the negotiated code units."""

    line: int
    character: int


@dataclass(frozen=True)
class TextChange:
    """Replace the text between two positions of the original document (end exclusive)."""

    start: EditorPosition
    end: EditorPosition
    new_text: str


QUICK_FIX = "quickfix"
FIX_ALL = "source.fixAll.ckptlint"


@dataclass(frozen=True)
class EditorAction:
    """A code action before it is LSP: what it says, its kind (`QUICK_FIX`, `FIX_ALL`),
    its edits, whether the editor may apply it by itself (`preferred`), and the finding
    it resolves (None for the fix-all)."""

    title: str
    kind: str
    changes: tuple[TextChange, ...]
    preferred: bool = False
    diagnostic: Diagnostic | None = None
