"""The `if` branches each call sits in and what their tests require, as the project model
reads them on the `ast` tree (`script_models.syntax.branch_paths`) and the rules receive them
by libcst call (`analysis.branches.branch_paths`)."""

from __future__ import annotations

import ast
import textwrap
from types import SimpleNamespace

import libcst as cst

from ckptlint.analysis.branches import branch_paths
from ckptlint.analysis.file_names import FileNames
from ckptlint.model.index import ProjectIndex

SCRIPT = textwrap.dedent(
    """
    if prepare(args) and not args.cpu:
        if args.strategy == "fsdp":
            wrap(model)
        elif args.strategy != "ddp":
            enable(model)
        else:
            plain(model)
    log(model if args.verbose else None)
    """
)


def _paths_by_callee(text: str) -> dict:
    """Each call's branch path, by the code of what it calls."""
    module = cst.parse_module(text)
    context = SimpleNamespace(
        ast_module=ast.parse(text), module=module, text=text, project=ProjectIndex(None, {}), relative_path="train.py",
        wrapper=cst.MetadataWrapper(module, unsafe_skip_copy=True),
    )
    context.once = lambda compute: compute(context)
    context.names = FileNames(context)
    return {module.code_for_node(call.func): path for call, path in branch_paths(context).items()}


def _paths(text: str) -> dict[str, tuple[tuple[int, ...], tuple[tuple[str, bool], ...]]]:
    return {
        name: (tuple(index for _, index in path.branches), path.conditions)
        for name, path in _paths_by_callee(text).items()
    }


def test_each_call_gets_the_branches_and_conditions_of_the_ifs_around_it():
    paths = _paths(SCRIPT)
    outer = (("prepare(args)", True), ("args.cpu", False))
    assert paths["prepare"] == ((), ())  # a call in a test is outside that `if`
    assert paths["wrap"] == ((0, 0), (*outer, ('args.strategy == "fsdp"', True)))
    # An `elif` is an `if` of its own in the `else` of the one before it.
    assert paths["enable"] == ((0, 1, 0), (*outer, ('args.strategy == "fsdp"', False), ('args.strategy == "ddp"', False)))
    assert paths["plain"] == ((0, 1, 1), (*outer, ('args.strategy == "fsdp"', False), ('args.strategy == "ddp"', True)))
    assert paths["log"] == ((), ())  # a conditional expression makes no branch


def test_calls_on_the_two_sides_of_one_if_are_exclusive_and_calls_after_it_are_not():
    by_name = _paths_by_callee(SCRIPT)
    assert by_name["wrap"].exclusive_with(by_name["enable"])
    assert by_name["enable"].exclusive_with(by_name["plain"])
    assert not by_name["wrap"].exclusive_with(by_name["log"])
