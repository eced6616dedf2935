# The cache turned off where checkpointing is on, by the same flag (or a runtime value).
# The cache off where checkpointing is on: the same flag, the right way round (and a
# value only known at runtime, which may be off wherever checkpointing is on).

from transformers import AutoModelForCausalLM

def train(args, data):
    model = AutoModelForCausalLM.from_pretrained(args.model, use_cache=args.no_gradient_checkpointing)
    if not args.no_gradient_checkpointing:
        model.gradient_checkpointing_enable()
    other = AutoModelForCausalLM.from_pretrained(args.model, use_cache=args.use_cache)
    other.gradient_checkpointing_enable()
    for batch in data:
        model(**batch).loss.backward()
        other(**batch).loss.backward()
