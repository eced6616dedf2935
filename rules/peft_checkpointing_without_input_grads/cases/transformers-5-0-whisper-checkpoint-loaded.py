# transformers >= 5.0: a Whisper checkpoint loaded through the speech auto class.
# ckptlint-case: target-version=transformers=5.17
# ckptlint-case: message-contains=`AutoModelForSpeechSeq2Seq` takes other inputs

from peft import LoraConfig, get_peft_model
from transformers import AutoModelForSpeechSeq2Seq

model = AutoModelForSpeechSeq2Seq.from_pretrained("openai/whisper-small")
model = get_peft_model(model, LoraConfig(r=32, target_modules=["q_proj", "v_proj"]))
model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": True})  # expect: CKPT021
for batch in loader:
    model(**batch).loss.backward()
