# transformers >= 5.0: the speech auto class with a Voxtral checkpoint, or a runtime checkpoint.
# transformers >= 5.0: the speech auto class with a Voxtral checkpoint (it takes
# `input_ids`, and transformers enables input grads), or a checkpoint only known at runtime.
# ckptlint-case: target-version=transformers=5.17

from peft import LoraConfig, get_peft_model
from transformers import AutoModelForSpeechSeq2Seq

model = AutoModelForSpeechSeq2Seq.from_pretrained("mistralai/Voxtral-Mini-3B-2507")
model = get_peft_model(model, LoraConfig(r=32, target_modules=["q_proj", "v_proj"]))
model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": True})
other = get_peft_model(AutoModelForSpeechSeq2Seq.from_pretrained(args.model), LoraConfig(r=8))
other.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": True})
for batch in loader:
    model(**batch).loss.backward()
    other(**batch).loss.backward()
