# The same on transformers 5, whose default kwargs are `{"use_reentrant": False}`: not reported.
# ckptlint-case: target-version=transformers=5.1.0
from accelerate import Accelerator, DistributedDataParallelKwargs
from transformers import AutoModelForSequenceClassification

accelerator = Accelerator(kwargs_handlers=[DistributedDataParallelKwargs(find_unused_parameters=True)])
model = AutoModelForSequenceClassification.from_pretrained("roberta-large", num_labels=3)
model.gradient_checkpointing_enable()
model, optimizer, loader = accelerator.prepare(model, optimizer, loader)
