"""Whether CPython's tree of a file holds anything CKPT002 could report besides checkpoint
sites: the calls and assignments its traversal collects (`rule.py`'s `visit_Call`,
`visit_Assign`), asked before any libcst parse."""

from __future__ import annotations

import ast

from ckptlint.analysis.checkpoint_sites import written_names
from ckptlint.model.library.transformers import GC_ENABLE, GC_KWARGS

# peft's QLoRA preparation, which turns Hugging Face checkpointing on.
PREPARE_FOR_KBIT_WORD = "prepare_model_for_kbit_training"


def collected(tree: ast.Module) -> bool:
    """Whether CPython's tree holds what `visit_Call` and `visit_Assign` collect and `finish`
    can report (and a little more: `gradient_checkpointing_enable` called by a bare name).
    Of the `partial(...)` calls, only one of torch's wrapper is checked: its first argument
    names `checkpoint_wrapper`, or a name an import binds to it (`as cw`)."""
    partials: list[ast.expr] = []  # their first arguments
    wrappers: set[str] = set()  # names imports bind to a `checkpoint_wrapper`
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            func = node.func
            name = func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else ""
            if (
                name in (GC_ENABLE, PREPARE_FOR_KBIT_WORD) or "checkpoint_wrapper" in name
                or any(keyword.arg == "gradient_checkpointing" for keyword in node.keywords)
            ):
                return True
            if name == "partial" and node.args:
                partials.append(node.args[0])
        elif isinstance(node, ast.Assign):
            if any(isinstance(target, ast.Attribute) and target.attr == GC_KWARGS for target in node.targets):
                return True
        elif isinstance(node, ast.alias) and node.asname and "checkpoint_wrapper" in node.name.rsplit(".", 1)[-1]:
            wrappers.add(node.asname)
    return any(
        "checkpoint_wrapper" in written or written in wrappers for first in partials for written in written_names(first)
    )
