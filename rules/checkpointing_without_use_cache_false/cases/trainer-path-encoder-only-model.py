# The Trainer path, and an encoder-only model.

from transformers import AutoModelForCausalLM, BertForSequenceClassification, Trainer

model = AutoModelForCausalLM.from_pretrained("gpt2")
model.gradient_checkpointing_enable()
Trainer(model=model, args=training_args, train_dataset=train).train()

encoder = BertForSequenceClassification.from_pretrained("bert-base-uncased")
encoder.gradient_checkpointing_enable()
for batch in loader:
    encoder(**batch).loss.backward()
