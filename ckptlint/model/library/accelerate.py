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
