# accelerate's `DistributedDataParallelKwargs(find_unused_parameters=True)`; `gradient_checkpointing_enable()` is reentrant on transformers 4.x.
# ckptlint-case: target-version=transformers=4.44.2
# ckptlint-case: column=1
from accelerate import Accelerator, DistributedDataParallelKwargs
from transformers import AutoModelForSequenceClassification

ddp_kwargs = DistributedDataParallelKwargs(find_unused_parameters=True)
accelerator = Accelerator(kwargs_handlers=[ddp_kwargs])
model = AutoModelForSequenceClassification.from_pretrained("roberta-large", num_labels=3)
model.gradient_checkpointing_enable()  # expect: CKPT006
model, optimizer, loader = accelerator.prepare(model, optimizer, loader)
for batch in loader:
    accelerator.backward(model(**batch).loss)
    optimizer.step()
