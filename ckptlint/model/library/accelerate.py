"""accelerate's behaviour as data: its FSDP plugin (an accelerate config's FSDP settings are
`fsdp_settings`')."""

from __future__ import annotations

ACCELERATE_FSDP_PLUGIN = frozenset(
    {
        "accelerate.FullyShardedDataParallelPlugin",
        "accelerate.utils.FullyShardedDataParallelPlugin",
        "accelerate.utils.dataclasses.FullyShardedDataParallelPlugin",
    }
)
# `Accelerator(kwargs_handlers=[DistributedDataParallelKwargs(find_unused_parameters=True)])`:
# `prepare` wraps the model in torch's DDP with these keyword arguments, `static_graph`
# included (accelerate 1.15 `utils/dataclasses.py`, `accelerator.py` `prepare_model`).
ACCELERATE_DDP_KWARGS = frozenset(
    {
        "accelerate.DistributedDataParallelKwargs",
        "accelerate.utils.DistributedDataParallelKwargs",
        "accelerate.utils.dataclasses.DistributedDataParallelKwargs",
    }
)
