# transformers hands its kwargs to `checkpoint` for each layer; BERT's layers keep dropout 0.1.
# transformers hands `gradient_checkpointing_kwargs` to `checkpoint` for each layer;
# BERT's layers keep dropout 0.1 under its defaults.
# ckptlint-case: message-contains=layers of `BertForMaskedLM`

from transformers import BertForMaskedLM

model = BertForMaskedLM.from_pretrained("bert-base-uncased")
model.gradient_checkpointing_enable(  # expect: CKPT033
    gradient_checkpointing_kwargs={"use_reentrant": False, "preserve_rng_state": False}
)
