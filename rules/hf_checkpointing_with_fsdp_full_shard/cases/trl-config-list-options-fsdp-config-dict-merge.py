# TRL's config, a list of options, an fsdp_config dict to merge into.
# ckptlint-case: column=10

from trl import SFTConfig

config = SFTConfig(  # expect: CKPT004
    "out",
    gradient_checkpointing=True,
    fsdp=["hybrid_shard", "auto_wrap"],
    fsdp_config={"backward_prefetch": "backward_pre"},
)
