"""What a file does that makes a DeepSpeed config's `activation_checkpointing` section live
(CKPT008): it names `deepspeed.checkpointing.configure`, DeepSpeed's checkpoint functions
(`mpu.checkpoint = deepspeed.checkpointing.checkpoint`, `from deepspeed.checkpointing
import checkpoint`) or `PipelineModule`, or it imports a package whose DeepSpeed integration
calls `configure` itself (Lightning's `DeepSpeedStrategy`, Megatron-DeepSpeed's `megatron`),
in a file that names DeepSpeed.
`ckptlint.model.library.deepspeed` holds the names."""

from __future__ import annotations

import ast
from collections.abc import Callable, Mapping

from ckptlint.model.library.deepspeed import CONFIGURING_PACKAGES, DEEPSPEED_CHECKPOINTING_WIRING
from ckptlint.model.syntax.ast_walk import walk


def deepspeed_wiring(
    tree: ast.Module, text: str, imports: Mapping[str, str], resolve: Callable[[ast.AST], str | None]
) -> tuple[str, ...]:
    """The DeepSpeed checkpointing names the file refers to, and the configuring packages it
    imports (by top-level name), sorted. A configuring package counts only in a file whose
    code uses DeepSpeed (imports from `deepspeed`, imports a `DeepSpeed...` name such as
    Lightning's `DeepSpeedStrategy`, or names a `"deepspeed..."` strategy): Lightning's other
    strategies configure nothing, and NVIDIA's Megatron (`megatron.core`, `megatron.bridge`,
    as LLaMA-Factory's Megatron bridge imports it) has no DeepSpeed at all."""
    if "deepspeed" not in text and "DeepSpeed" not in text:  # a cheap test before the walk
        return ()
    found: set[str] = set()
    uses_deepspeed = any(
        absolute.partition(".")[0] == "deepspeed" or "DeepSpeed" in absolute.rpartition(".")[2]
        for absolute in imports.values()
    )
    for node in walk(tree):
        kind = type(node)
        if kind is ast.Attribute or kind is ast.Name:
            name = resolve(node)
            if name in DEEPSPEED_CHECKPOINTING_WIRING:
                found.add(name)
        elif kind is ast.Constant and isinstance(node.value, str) and node.value.startswith("deepspeed"):
            uses_deepspeed = True  # `Trainer(strategy="deepspeed_stage_2")`
    if uses_deepspeed:
        found.update(
            package for absolute in imports.values() if (package := absolute.partition(".")[0]) in CONFIGURING_PACKAGES
        )
    return tuple(sorted(found))
