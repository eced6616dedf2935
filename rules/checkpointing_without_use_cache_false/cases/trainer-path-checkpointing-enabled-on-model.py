# The Trainer path: a causal LM checkpointed by hand and trained by transformers' `Trainer`, which leaves the cache alone before 5.0; an encoder-only model beside it.
# ckptlint-case: target-version=transformers=4.46
# ckptlint-case: message-contains=trained by transformers' `Trainer`

from transformers import AutoModelForCausalLM, BertForSequenceClassification, Trainer

model = AutoModelForCausalLM.from_pretrained("gpt2")
model.gradient_checkpointing_enable()  # expect: CKPT020
Trainer(model=model, args=training_args, train_dataset=train).train()

encoder = BertForSequenceClassification.from_pretrained("bert-base-uncased")
encoder.gradient_checkpointing_enable()
Trainer(model=encoder, args=training_args, train_dataset=train).train()
