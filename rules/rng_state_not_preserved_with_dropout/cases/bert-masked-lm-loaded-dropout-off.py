# A BERT masked LM loaded with its dropout off.

from transformers import BertForMaskedLM

bert = BertForMaskedLM.from_pretrained("bert-base-uncased", hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0)
bert.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"preserve_rng_state": False})
