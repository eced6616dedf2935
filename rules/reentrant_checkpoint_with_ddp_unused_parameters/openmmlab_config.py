"""An OpenMMLab config (mmdet / mmseg / mmpretrain, read by mmcv's or mmengine's runner) that
turns DDP's unused-parameter detection on and checkpoints a backbone with `with_cp=True` (or
`use_checkpoint=True`, the Swin / BEiT / FocalNet backbones' flag).

mmengine's runner hands `find_unused_parameters` (the config's top-level key, or
`model_wrapper_cfg=dict(type="MMDistributedDataParallel", find_unused_parameters=True)`) to
`MMDistributedDataParallel`, torch's DDP (mmengine 0.10 `runner.py` `wrap_model`; mmcv 1.x's
`train_detector` reads the same key). The OpenMMLab backbones' `with_cp` runs each block with
`torch.utils.checkpoint.checkpoint(_inner_forward, x)`, without `use_reentrant`: reentrant
(mmdet 3.3 `models/backbones/resnet.py` `BasicBlock.forward`, mmcv's and mmpretrain's blocks
alike). A backbone of the project decides for itself: its `if self.<flag>:` checkpoint calls
(`ProjectIndex.checkpoints_behind_flag`) must all be reentrant (`use_reentrant` left out or
True); `use_checkpoint` only counts through such a backbone."""

from __future__ import annotations

from ckptlint.lazy_libcst import cst

from ckptlint.analysis.huggingface import keyword_value

FIND_UNUSED = "find_unused_parameters"
WITH_CP = "with_cp"
USE_CHECKPOINT = "use_checkpoint"
CHECKPOINT_FLAGS = (WITH_CP, USE_CHECKPOINT)
_MM_DDP = ("MMDistributedDataParallel", "mmengine.model.MMDistributedDataParallel")


def find_unused_setting(module: cst.Module, calls: list[cst.Call]) -> cst.CSTNode | None:
    """`find_unused_parameters = True` at the top level of the config, or a
    `model_wrapper_cfg = dict(type="MMDistributedDataParallel", find_unused_parameters=True)`."""
    for statement in module.body:
        if not isinstance(statement, cst.SimpleStatementLine):
            continue
        for small in statement.body:
            if (
                isinstance(small, cst.Assign)
                and any(isinstance(t.target, cst.Name) and t.target.value == FIND_UNUSED for t in small.targets)
                and _is_true(small.value)
            ):
                return small
    for call in calls:
        kind = keyword_value(call, "type")
        if (
            isinstance(call.func, cst.Name) and call.func.value == "dict"
            and isinstance(kind, cst.SimpleString) and kind.evaluated_value in _MM_DDP
            and _is_true(keyword_value(call, FIND_UNUSED))
            and not _is_true(keyword_value(call, "static_graph"))
        ):
            return call
    return None


def checkpointing_arguments(calls: list[cst.Call]) -> list[tuple[cst.Arg, str | None]]:
    """The `with_cp=True` / `use_checkpoint=True` arguments of the config's `dict(...)` calls,
    each with the `type` its dict names (None when it leaves it to a base config)."""
    found = []
    for call in calls:
        if not (isinstance(call.func, cst.Name) and call.func.value == "dict"):
            continue
        kind = keyword_value(call, "type")
        name = kind.evaluated_value if isinstance(kind, cst.SimpleString) else None
        found.extend(
            (arg, name) for arg in call.args
            if arg.keyword is not None and arg.keyword.value in CHECKPOINT_FLAGS and _is_true(arg.value)
        )
    return found


def runs_reentrant(project, flag: str, backbone: str | None) -> bool:
    """Whether turning `flag` on checkpoints reentrantly: the project's classes checkpointing
    behind it (those of the backbone's module when its `type` names a project class) are all
    reentrant; without any, OpenMMLab's own `with_cp` (reentrant), never `use_checkpoint`."""
    modules = project.modules_defining_class(backbone) if backbone is not None else frozenset()
    if modules:
        # The project's own backbone: what its module checkpoints behind the flag decides.
        calls = [call for module in sorted(modules) for call in project.checkpoints_behind_flag(flag, module)]
        return bool(calls) and all(reentrant is True for _, reentrant in calls)
    calls = project.checkpoints_behind_flag(flag)
    if not calls:
        return flag == WITH_CP
    return all(reentrant is True for _, reentrant in calls)


def is_config(module: cst.Module) -> bool:
    """A config file: top-level `model = dict(...)` (or `_base_`), no classes nor functions."""
    names = set()
    for statement in module.body:
        if isinstance(statement, (cst.ClassDef, cst.FunctionDef)):
            return False
        if isinstance(statement, cst.SimpleStatementLine):
            for small in statement.body:
                if isinstance(small, cst.Assign):
                    names.update(t.target.value for t in small.targets if isinstance(t.target, cst.Name))
    return bool(names & {"model", "_base_"})


def _is_true(value: cst.BaseExpression | None) -> bool:
    return isinstance(value, cst.Name) and value.value == "True"
