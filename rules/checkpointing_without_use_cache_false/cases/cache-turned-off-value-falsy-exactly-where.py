# The cache turned off by a value that is falsy exactly where checkpointing is *not* on (StarCoder).
# The cache turned off by a value that is falsy exactly where checkpointing is *not*
# turned on (StarCoder's fine-tuning script: the comment says the opposite).
# ckptlint-case: target-version=transformers=4.28
# ckptlint-case: column=9
# ckptlint-case: message-contains=on `model`, a generative `AutoModelForCausalLM`

import argparse
from transformers import AutoModelForCausalLM

def train(data):
    parser = argparse.ArgumentParser()
    parser.add_argument("--no_gradient_checkpointing", action="store_true")
    args = parser.parse_args()
    # disable caching when using gradient checkpointing
    model = AutoModelForCausalLM.from_pretrained("bigcode/starcoderbase-1b", use_cache=not args.no_gradient_checkpointing)
    if not args.no_gradient_checkpointing:
        model.gradient_checkpointing_enable()  # expect: CKPT020
    for batch in data:
        model(**batch).loss.backward()
