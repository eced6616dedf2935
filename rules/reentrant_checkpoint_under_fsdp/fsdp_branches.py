"""Whether a call of CKPT002's sits on a branch that never runs with the file's FSDP use
(`if args.strategy == "fsdp": model = FSDP(model)` beside `if args.strategy ==
"deepspeed": model.gradient_checkpointing_enable()`)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ckptlint.lazy_libcst import cst

from ckptlint.analysis.branches import BranchPath, branch_paths

if TYPE_CHECKING:
    from ckptlint.rule import FileContext


class FsdpBranches:
    """The branch paths of one file's calls, found when first asked."""

    def __init__(self, context: FileContext) -> None:
        self.context = context
        self._branches: dict[cst.Call, BranchPath] | None = None  # `branch_paths`, when first asked

    def never_with(self, call: cst.Call) -> bool:
        """Whether every FSDP use that reaches the file is a call of this file on a branch
        that never runs with `call` (`if args.strategy == "fsdp": model = FSDP(model)` and
        `if args.strategy == "deepspeed": model.gradient_checkpointing_enable()`; in a method,
        `self.args.strategy` is the `args.strategy` the script's function stored there)."""
        relative = self.context.relative_path
        uses = self.context.project.fsdp_uses_reaching(relative) if self.context.settings.fsdp == "auto" else ()
        if not uses or any(use.path != relative for use in uses):
            return False
        if self._branches is None:
            self._branches = branch_paths(self.context)
        mine = self._branches.get(call)
        if mine is None or not (mine.branches or mine.conditions):
            return False
        lines = {use.line for use in uses}
        at_uses: dict[int, list] = {}
        for other, path in self._branches.items():
            line = self.context.position(other).start.line if path.branches or path.conditions else None
            if line in lines:
                at_uses.setdefault(line, []).append(path)
        mine = as_seen_from_outside(mine)
        return all(
            at_uses.get(line) and all(as_seen_from_outside(path).exclusive_with(mine) for path in at_uses[line])
            for line in lines
        )


def as_seen_from_outside(path: BranchPath) -> BranchPath:
    """A branch path with `self.` dropped from its conditions: a method's `if
    self.args.strategy == "deepspeed":` tests the options its script's `args` holds."""
    return BranchPath(path.branches, tuple((atom.removeprefix("self."), truth) for atom, truth in path.conditions))
