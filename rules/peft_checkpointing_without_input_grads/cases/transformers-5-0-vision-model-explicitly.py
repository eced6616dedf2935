# transformers >= 5.0: a vision model with explicitly reentrant kwargs stays exposed.
# ckptlint-case: target-version=transformers=5.17
# ckptlint-case: message-contains=`AutoModelForImageClassification` takes other inputs

from peft import LoraConfig, get_peft_model
from transformers import AutoModelForImageClassification

model = AutoModelForImageClassification.from_pretrained("google/vit-base-patch16-224-in21k")
model = get_peft_model(model, LoraConfig(target_modules=["query", "value"], modules_to_save=["classifier"]))
model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": True})  # expect: CKPT021
for batch in loader:
    model(**batch).loss.backward()
