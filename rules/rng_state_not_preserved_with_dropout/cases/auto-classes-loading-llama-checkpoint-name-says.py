# Auto classes loading a Llama checkpoint, a name that says nothing, a BERT with its dropout off.
# Auto classes loading a checkpoint whose layers draw nothing (Llama), one whose name
# says nothing of its family, and a BERT checkpoint loaded with its dropout off.

from transformers import AutoModelForCausalLM, AutoModelForSequenceClassification

kwargs = {"use_reentrant": False, "preserve_rng_state": False}
llama = AutoModelForCausalLM.from_pretrained("meta-llama/Llama-3.2-1B")
llama.gradient_checkpointing_enable(gradient_checkpointing_kwargs=kwargs)
minilm = AutoModelForSequenceClassification.from_pretrained("sentence-transformers/all-MiniLM-L6-v2")
minilm.gradient_checkpointing_enable(gradient_checkpointing_kwargs=kwargs)
