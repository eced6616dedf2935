"""The code actions of a buffer's findings, over text: a finding's own fix (safe ones
preferred, unsafe ones said to be so), a `# noqa: CODE` suppression, and one action that
applies every safe fix of the file. Each is the edits between the buffer's text and the
text the action produces."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from ckptlint.engine import apply_fixes
from ckptlint.recipes import recipe_kind
from ckptlint.server.edits import edits_between, with_noqa
from ckptlint.server.types import FIX_ALL, QUICK_FIX, EditorAction, PositionEncoding
from ckptlint.types import Applicability, Diagnostic

FIX_ALL_TITLE = "Fix all safe ckptlint findings in this file"


def finding_actions(
    text: str, diagnostic: Diagnostic, *, comments: str | None, encoding: PositionEncoding
) -> list[EditorAction]:
    """The finding's fix, when it has one, then its suppression (where the format has
    comments: `comment_style`)."""
    actions = []
    fix = diagnostic.fix
    if fix is not None:
        fixed, applied = apply_fixes(text, [diagnostic], unsafe=True)
        if applied and fixed != text:
            unsafe = fix.applicability is Applicability.UNSAFE
            actions.append(
                EditorAction(
                    f"{diagnostic.code}: {fix.message}" + (" (unsafe)" if unsafe else ""),
                    QUICK_FIX,
                    edits_between(text, fixed, encoding),
                    preferred=not unsafe,
                    diagnostic=diagnostic,
                )
            )
    row = diagnostic.noqa_row or diagnostic.location.row
    suppressed = with_noqa(text, row, diagnostic.code, python=comments == "python") if comments else None
    if suppressed is not None and suppressed != text:
        actions.append(
            EditorAction(
                f"Suppress {diagnostic.code} with `# noqa: {diagnostic.code}`",
                QUICK_FIX,
                edits_between(text, suppressed, encoding),
                diagnostic=diagnostic,
            )
        )
    return actions


def fix_all_action(text: str, fixed: str, encoding: PositionEncoding) -> EditorAction | None:
    """The action applying every safe fix (`fixed`: the text after them), if any changes it."""
    if fixed == text:
        return None
    return EditorAction(FIX_ALL_TITLE, FIX_ALL, edits_between(text, fixed, encoding))


def has_safe_fix(diagnostics: Sequence[Diagnostic]) -> bool:
    return any(d.fix is not None and d.fix.applicability is Applicability.SAFE for d in diagnostics)


def comment_style(path: Path, text: str) -> str | None:
    """How a `# noqa` comment goes into the buffer: "python" (comments found with Python's
    tokenizer), "hash" (YAML and shell comments), None where the format has no comments
    (JSON)."""
    kind = recipe_kind(path, text)
    return "python" if kind is None else None if kind == "json" else "hash"


def wanted(kind: str, only: Sequence[str] | None) -> bool:
    """Whether a client that asked for the kinds `only` wants an action of `kind`
    (`source.fixAll` includes `source.fixAll.ckptlint`)."""
    return not only or any(kind == asked or kind.startswith(asked + ".") for asked in only)
