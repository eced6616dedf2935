"""What a file does that makes a DeepSpeed config's `activation_checkpointing` section live
(CKPT008): it names `deepspeed.checkpointing.configure`, DeepSpeed's checkpoint functions
(`mpu.checkpoint = deepspeed.checkpointing.checkpoint`, `from deepspeed.checkpointing
import checkpoint`) or `PipelineModule`, or it imports a package whose DeepSpeed integration
calls `configure` itself (Lightning's `DeepSpeedStrategy`, Megatron-DeepSpeed's `megatron`).
`ckptlint.model.library.deepspeed` holds the names."""

from __future__ import annotations

import ast
from collections.abc import Callable, Mapping

from ckptlint.model.library.deepspeed import CONFIGURING_PACKAGES, DEEPSPEED_CHECKPOINTING_WIRING
from ckptlint.model.syntax.ast_walk import walk

# An imported package that configures DeepSpeed's checkpointing itself is recorded by its
# top-level name (Lightning only where the file names DeepSpeed: its other strategies do not).
_NEEDS_DEEPSPEED = ("pytorch_lightning", "lightning", "lightning_fabric")


def deepspeed_wiring(
    tree: ast.Module, text: str, imports: Mapping[str, str], resolve: Callable[[ast.AST], str | None]
) -> tuple[str, ...]:
    """The DeepSpeed checkpointing names the file refers to, and the configuring packages it
    imports (by top-level name), sorted."""
    mentions_deepspeed = "deepspeed" in text
    if not mentions_deepspeed and "megatron" not in text:
        return ()
    found: set[str] = set()
    for absolute in imports.values():
        package = absolute.partition(".")[0]
        if package in CONFIGURING_PACKAGES and (mentions_deepspeed or package not in _NEEDS_DEEPSPEED):
            found.add(package)
    if mentions_deepspeed:
        for node in walk(tree):
            if type(node) is ast.Attribute or type(node) is ast.Name:
                name = resolve(node)
                if name in DEEPSPEED_CHECKPOINTING_WIRING:
                    found.add(name)
    return tuple(sorted(found))
