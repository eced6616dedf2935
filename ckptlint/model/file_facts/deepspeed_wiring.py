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

# The attribute a reference to one of DeepSpeed's names ends with (`deepspeed.checkpointing.configure`).
_LAST_NAMES = frozenset(name.rpartition(".")[2] for name in DEEPSPEED_CHECKPOINTING_WIRING)


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
    imported = set(imports.values())
    from_deepspeed = any(absolute.partition(".")[0] == "deepspeed" for absolute in imported)
    packages = {absolute.partition(".")[0] for absolute in imported} & set(CONFIGURING_PACKAGES)
    if not from_deepspeed and not packages:
        return ()  # DeepSpeed's names are reached through an import of it
    found: set[str] = set(DEEPSPEED_CHECKPOINTING_WIRING & imported)
    uses_deepspeed = from_deepspeed or any("DeepSpeed" in absolute.rpartition(".")[2] for absolute in imported)
    for node in walk(tree):
        kind = type(node)
        if kind is ast.Attribute:
            if from_deepspeed and node.attr in _LAST_NAMES:
                name = resolve(node)
                if name in DEEPSPEED_CHECKPOINTING_WIRING:
                    found.add(name)
        elif kind is ast.Constant and packages and not uses_deepspeed:
            if isinstance(node.value, str) and node.value.startswith("deepspeed"):
                uses_deepspeed = True  # `Trainer(strategy="deepspeed_stage_2")`
    if uses_deepspeed:
        found.update(packages)
    return tuple(sorted(found))
