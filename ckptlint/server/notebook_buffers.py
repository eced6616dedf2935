"""Notebooks in the editor: an LSP notebook document (its cells, each a text document of
its own) analysed as the `.ipynb` file it stands for, and the findings placed back in
their cells.

The cells are written out as an nbformat 4 notebook and linted as the command line lints
a notebook file (`ckptlint.notebooks`: IPython escapes neutralised, each cell that is not
Python on its own reported in its cell, the others linted together in order), so the
editor and `ckptlint nb.ipynb` agree. A finding's `cell` is the 1-based number of the cell
among all of them, markdown too: the number of the cell document it goes to.

A VS Code notebook cell that a client opens as a plain text document (a
`vscode-notebook-cell:` URI, when the client does not synchronise notebooks) is analysed
the same way, as a notebook of that one cell: never as the JSON of the `.ipynb` file whose
name its URI carries.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass

from ckptlint.notebooks import NotebookError, read_notebook

# The URI schemes of notebook cells opened as text documents.
CELL_SCHEMES = ("vscode-notebook-cell", "vscode-notebook-cell-output")


@dataclass(frozen=True)
class Cell:
    uri: str
    text: str
    code: bool  # a Python code cell (markdown, raw and other languages' cells are not linted)


def is_cell_uri(uri: str) -> bool:
    return uri.split(":", 1)[0] in CELL_SCHEMES


def notebook_text(cells: Sequence[Cell]) -> str:
    """The `.ipynb` text of the cells, in order."""
    document = {
        "cells": [
            {"cell_type": "code", "execution_count": None, "metadata": {}, "outputs": [], "source": cell.text}
            if cell.code
            else {"cell_type": "markdown", "metadata": {}, "source": cell.text}
            for cell in cells
        ],
        "metadata": {"language_info": {"name": "python"}},
        "nbformat": 4,
        "nbformat_minor": 5,
    }
    return json.dumps(document, indent=1, ensure_ascii=False) + "\n"


def by_cell(diagnostics: Sequence, cells: Sequence[Cell]) -> dict[str, list]:
    """Each cell's findings (every cell present, so that a cell's old findings are cleared).
    A finding placed in no cell (a problem of the whole notebook) goes to the first."""
    placed: dict[str, list] = {cell.uri: [] for cell in cells}
    for diagnostic in diagnostics:
        number = diagnostic.cell if diagnostic.cell is not None and 1 <= diagnostic.cell <= len(cells) else 1
        if cells:
            placed[cells[number - 1].uri].append(diagnostic)
    return placed


def fixed_cells(cells: Sequence[Cell], fixed_notebook: str) -> dict[str, str]:
    """The cells whose text the fixes changed, with their new text."""
    try:
        fixed = read_notebook(fixed_notebook)
    except NotebookError:
        return {}
    sources = fixed.cell_sources()
    return {
        cell.uri: sources[number]
        for number, cell in enumerate(cells, start=1)
        if number in sources and sources[number] != cell.text
    }
