# accelerate's FSDP plugin checkpoints the layers, and transformers < 5.0 again, reentrant.
# accelerate's FSDP plugin checkpoints the layers, and transformers < 5.0 checkpoints
# them again, reentrant by default.
# ckptlint-case: target-version=transformers=4.46
# ckptlint-case: target-version=torch=2.4
# ckptlint-case: column=5
# ckptlint-case: message-contains=accelerator.prepare` (line 17) hands to accelerate's FSDP plugin

from accelerate import Accelerator, FullyShardedDataParallelPlugin
from transformers import AutoModelForCausalLM

def main(loader):
    plugin = FullyShardedDataParallelPlugin(activation_checkpointing=True, auto_wrap_policy="transformer_based_wrap")
    accelerator = Accelerator(fsdp_plugin=plugin)
    model = AutoModelForCausalLM.from_pretrained("m", use_cache=False)
    model.gradient_checkpointing_enable()  # expect: CKPT005
    model, opt = accelerator.prepare(model, opt)
    for batch in loader:
        accelerator.backward(model(**batch).loss)
