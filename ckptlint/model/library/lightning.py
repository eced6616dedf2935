"""Lightning's behaviour as data: its FSDP and model-parallel strategies, Fabric's setup,
its entry points."""

from __future__ import annotations

LIGHTNING_PACKAGES = ("lightning.pytorch", "pytorch_lightning", "lightning.fabric", "lightning_fabric")
LIGHTNING_FSDP_STRATEGY = frozenset(
    f"{package}.strategies{sub}.FSDPStrategy" for package in LIGHTNING_PACKAGES for sub in ("", ".fsdp")
)
# Lightning's `ModelParallelStrategy(parallelize_fn, ...)` (lightning 2.3 to 2.5
# `fabric/strategies/model_parallel.py`): `setup_module` runs `parallelize_fn(module,
# self.device_mesh)` on the module handed to `Fabric.setup(module, ...)` / `setup_module(module)`
# (`fabric.py`), where projects apply FSDP2 and activation checkpointing (litgpt's
# `finetune/lora.py`). The Trainer's strategy of that name has no such argument (it calls
# the LightningModule's `configure_model`).
LIGHTNING_MODEL_PARALLEL = frozenset(
    f"{package}.strategies{sub}.ModelParallelStrategy"
    for package in ("lightning.fabric", "lightning_fabric") for sub in ("", ".model_parallel")
)
LIGHTNING_PARALLELIZE_KEYWORD = "parallelize_fn"
LIGHTNING_FABRIC_SETUP_METHODS = frozenset({"setup", "setup_module"})
LIGHTNING_ENTRY_POINTS = frozenset(
    {"lightning.Trainer", "lightning.Fabric", "lightning.pytorch.Trainer", "pytorch_lightning.Trainer",
     "lightning.fabric.Fabric", "lightning_fabric.Fabric"}
)
# Lightning's DDP strategies: `DDPStrategy(find_unused_parameters=True, static_graph=...)`
# hands its keyword arguments to torch's `DistributedDataParallel` (lightning 2.x
# `pytorch/strategies/ddp.py`, `_ddp_kwargs`); pytorch_lightning 1.x spelled it
# `plugins=DDPPlugin(find_unused_parameters=True)`. The registered strategy names ending in
# `_find_unused_parameters_true` pass `find_unused_parameters=True` (lightning 2.x
# `DDPStrategy.register_strategies`: `ddp`, `ddp_spawn`, `ddp_fork`, `ddp_notebook`). (Before
# lightning 2.0 plain `"ddp"` defaulted to True as well; not counted: the version decides.)
LIGHTNING_DDP_STRATEGY = frozenset(
    {f"{package}.strategies{sub}.DDPStrategy" for package in LIGHTNING_PACKAGES for sub in ("", ".ddp")}
    | {"pytorch_lightning.plugins.DDPPlugin", "pytorch_lightning.plugins.training_type.DDPPlugin"}
)
LIGHTNING_FIND_UNUSED_SUFFIX = "_find_unused_parameters_true"
