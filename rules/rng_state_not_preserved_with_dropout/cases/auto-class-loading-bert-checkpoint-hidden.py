# An Auto class loading a BERT checkpoint (`hidden_dropout_prob` 0.1).
# ckptlint-case: column=5
# ckptlint-case: message-contains=`AutoModelForSequenceClassification` loaded from `google-bert/bert-base-uncased`

from transformers import AutoModelForSequenceClassification

GC_KWARGS = {"use_reentrant": False, "preserve_rng_state": False}

def main(loader):
    model = AutoModelForSequenceClassification.from_pretrained("google-bert/bert-base-uncased", num_labels=3)
    model.gradient_checkpointing_enable(gradient_checkpointing_kwargs=GC_KWARGS)  # expect: CKPT033
    model.train()
    for batch in loader:
        model(**batch).loss.backward()
