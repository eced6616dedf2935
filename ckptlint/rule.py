"""The rule API.

A rule is one module under `rules/` holding one `Rule` subclass. The class declares its code,
slug, message, fix applicability, the library versions where its hazard exists and its
examples; its docstring is its documentation page. Rules are libcst batchable visitors, so
every selected rule runs in the same single traversal of a file, and they also receive
higher-level facts from the engine (`visit_checkpoint_site`).
"""

from __future__ import annotations

import inspect
import traceback
import textwrap
from collections.abc import Sequence
from dataclasses import dataclass, field
from functools import lru_cache
from typing import TYPE_CHECKING, ClassVar

import libcst as cst

from ckptlint.types import RULE_DOCS_URL, Applicability, Diagnostic, Fix, Location
from ckptlint.versions import Applies, VersionRange

if TYPE_CHECKING:
    from ckptlint.analysis.checkpoint_sites import CheckpointSite
    from ckptlint.config import Settings
    from ckptlint.traversal import FileContext
    from ckptlint.model.index import ProjectIndex



@dataclass(frozen=True)
class Valid:
    """Code the rule must not report (under the given target versions)."""

    code: str
    target_versions: dict[str, str] = field(default_factory=dict)

    @property
    def source(self) -> str:
        return textwrap.dedent(self.code).lstrip("\n")


@dataclass(frozen=True)
class Invalid:
    """Code the rule must report at `line`/`column` (1-based, in the dedented code), and
    the code after applying its fix (`None`: the rule offers no fix here)."""

    code: str
    line: int
    column: int = 1
    expected_fix: str | None = None
    message_contains: str | None = None
    target_versions: dict[str, str] = field(default_factory=dict)

    @property
    def source(self) -> str:
        return textwrap.dedent(self.code).lstrip("\n")

    @property
    def fixed_source(self) -> str | None:
        if self.expected_fix is None:
            return None
        return textwrap.dedent(self.expected_fix).lstrip("\n")


@dataclass(frozen=True)
class Replacement:
    """A node to replace and what replaces it; the engine turns it into minimal text edits."""

    original: cst.CSTNode
    replacement: cst.CSTNode


@lru_cache(maxsize=None)
def _decoded(words: tuple[bytes, ...]) -> tuple[str, ...]:
    return tuple(word.decode() for word in words)


class Rule(cst.BatchableCSTVisitor):
    code: ClassVar[str]
    name: ClassVar[str]
    message: ClassVar[str]
    fix: ClassVar[Applicability | None] = None
    # The hazard exists only where the targeted versions fall in every range.
    targets: ClassVar[tuple[VersionRange, ...]] = ()
    # Byte strings one of which a file must contain for the rule to find anything in it,
    # and ones it must contain all of: the cheap test that keeps most files from libcst.
    triggers: ClassVar[tuple[bytes, ...]] = (b"checkpoint",)
    requires: ClassVar[tuple[bytes, ...]] = ()
    # Whether the rule reads the project index (`self.context.project`): a run builds the
    # index only when a selected rule does.
    uses_project: ClassVar[bool] = False

    @classmethod
    def may_apply_to_project(cls, project: ProjectIndex, relative_path: str, settings: Settings, text: str) -> bool:
        """For rules that use the project: whether the index (with this file's facts) and
        the text leave anything for the rule to find in the file. False skips the file's
        libcst parse."""
        return True

    @classmethod
    def may_apply_to(cls, text: str) -> bool:
        return all(word in text for word in _decoded(cls.requires)) and any(
            word in text for word in _decoded(cls.triggers)
        )
    # Codes this rule implies at the same node; those are dropped when this one fires.
    supersedes: ClassVar[tuple[str, ...]] = ()
    valid: ClassVar[Sequence[Valid]] = ()
    invalid: ClassVar[Sequence[Invalid]] = ()

    def __init__(self, context: FileContext) -> None:
        super().__init__()
        self.context = context
        self.diagnostics: list[Diagnostic] = []
        # A rule that raises is stopped for this file; the engine reports the error with the
        # file and the rule, and every other rule and file goes on.
        self.internal_error: str | None = None

    def get_visitors(self):
        return {name: self._guarded(function) for name, function in super().get_visitors().items()}

    def _guarded(self, function):
        def call(node):
            self.run_guarded(function, node)

        return call

    def run_guarded(self, function, *args) -> None:
        if self.internal_error is not None:
            return
        try:
            function(*args)
        except RecursionError:
            raise  # the file is too deep for any rule; the engine reports it once
        except Exception:
            self.internal_error = traceback.format_exc(limit=-4).rstrip()

    # --- hooks -------------------------------------------------------------------------

    def visit_checkpoint_site(self, site: CheckpointSite) -> None:
        """Called once per resolved checkpoint site, after the traversal."""

    def finish(self) -> None:
        """Called once after the traversal and the checkpoint sites: for rules that collect
        candidates while visiting and decide once the whole file (and its metadata) is known."""

    # --- reporting ---------------------------------------------------------------------

    def report(
        self,
        node: cst.CSTNode,
        message: str | None = None,
        *,
        replacements: Sequence[Replacement] = (),
        fix_message: str | None = None,
    ) -> None:
        position = self.context.position(node)
        start = Location(position.start.line, position.start.column + 1)
        end = Location(position.end.line, position.end.column + 1)
        fix = None
        if replacements and self.fix is not None:
            edits = []
            for item in replacements:
                edit = self.context.edit_for(item.original, item.replacement)
                if edit is None:
                    edits = []
                    break
                edits.append(edit)
            if edits:
                fix = Fix(self.fix, fix_message or self.name, tuple(sorted(edits)))
        self.diagnostics.append(
            Diagnostic(
                code=self.code,
                message=message or self.message,
                path=self.context.display_path,
                location=start,
                end_location=end,
                fix=fix,
                noqa_row=start.row,
                url=self.url(),
            )
        )

    def version_note(self) -> str:
        """A suffix naming the affected versions when the targeted ones are unknown."""
        if self.context.versions.applies(self.targets) is Applies.UNKNOWN:
            return " (affects " + ", ".join(str(r) for r in self.targets) + "; target version unknown)"
        return ""

    # --- documentation -----------------------------------------------------------------

    @classmethod
    def url(cls) -> str:
        return RULE_DOCS_URL.format(code=cls.code)

    @classmethod
    def summary(cls) -> str:
        return inspect.cleandoc(cls.__doc__ or "").split("\n", 1)[0]

    @classmethod
    def documentation(cls) -> str:
        """The rule page: a title, fix availability, target versions, then the docstring."""
        body = inspect.cleandoc(cls.__doc__ or "").split("\n", 1)
        lines = [f"# {cls.name} ({cls.code})", ""]
        lines.append(f"{body[0]}")
        lines.append("")
        if cls.fix is None:
            lines.append("Fix: none.")
        else:
            lines.append(f"Fix: available ({cls.fix.value}).")
        if cls.targets:
            lines.append("Applies to: " + ", ".join(str(r) for r in cls.targets) + ".")
        lines.append("")
        if len(body) > 1:
            lines.append(body[1].strip("\n"))
        return "\n".join(lines).rstrip() + "\n"
