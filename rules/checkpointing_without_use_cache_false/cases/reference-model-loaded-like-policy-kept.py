# A reference model loaded like the policy and kept for inference: never checkpointed.

from transformers import AutoModelForCausalLM

def train(args, data):
    policy = AutoModelForCausalLM.from_pretrained(args.model, use_cache=False)
    policy.gradient_checkpointing_enable()
    reference = AutoModelForCausalLM.from_pretrained(args.model)
    reference.gradient_checkpointing_enable()
    reference.eval()
    for batch in data:
        with torch.no_grad():
            reference_logits = reference(**batch).logits
        policy(**batch).loss.backward()
