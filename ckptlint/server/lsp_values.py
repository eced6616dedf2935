"""lsprotocol's values from ckptlint's: diagnostics, ranges, code actions (the server's
conversions, pure)."""

from __future__ import annotations

from lsprotocol import types

from ckptlint.rule_codes import UNUSED_NOQA
from ckptlint.server.edits import DocumentPositions
from ckptlint.server.types import EditorAction, EditorPosition, TextChange
from ckptlint.types import Diagnostic, Severity


def editor_range(lsp_range: types.Range) -> tuple[EditorPosition, EditorPosition]:
    return (
        EditorPosition(lsp_range.start.line, lsp_range.start.character),
        EditorPosition(lsp_range.end.line, lsp_range.end.character),
    )


def span(diagnostic: Diagnostic, positions: DocumentPositions) -> tuple[EditorPosition, EditorPosition]:
    return positions.position(diagnostic.location), positions.position(diagnostic.end_location)


def touches(a: tuple[EditorPosition, EditorPosition], b: tuple[EditorPosition, EditorPosition]) -> bool:
    """Whether two ranges overlap or touch (a cursor at either end of a finding counts)."""
    return a[0] <= b[1] and b[0] <= a[1]


def lsp_position(position: EditorPosition) -> types.Position:
    return types.Position(line=position.line, character=position.character)


def lsp_range(start: EditorPosition, end: EditorPosition) -> types.Range:
    return types.Range(start=lsp_position(start), end=lsp_position(end))


_LSP_SEVERITIES = {
    Severity.ERROR: types.DiagnosticSeverity.Error,
    Severity.WARNING: types.DiagnosticSeverity.Warning,
    Severity.INFO: types.DiagnosticSeverity.Information,
}


def lsp_diagnostic(diagnostic: Diagnostic, positions: DocumentPositions) -> types.Diagnostic:
    return types.Diagnostic(
        range=lsp_range(*span(diagnostic, positions)),
        severity=_LSP_SEVERITIES[diagnostic.severity],
        # An unused `# noqa` is shown faded, as editors show unused code.
        tags=[types.DiagnosticTag.Unnecessary] if diagnostic.code == UNUSED_NOQA.code else None,
        code=diagnostic.code,
        code_description=types.CodeDescription(href=diagnostic.url) if diagnostic.url else None,
        source="ckptlint",
        message=diagnostic.message,
    )


def text_edit(change: TextChange) -> types.TextEdit:
    return types.TextEdit(range=lsp_range(change.start, change.end), new_text=change.new_text)


def lsp_code_action(uri: str, action: EditorAction, positions: DocumentPositions) -> types.CodeAction:
    return types.CodeAction(
        title=action.title,
        kind=action.kind,
        diagnostics=[lsp_diagnostic(action.diagnostic, positions)] if action.diagnostic is not None else None,
        is_preferred=action.preferred or None,
        edit=types.WorkspaceEdit(changes={uri: [text_edit(change) for change in action.changes]}),
    )
