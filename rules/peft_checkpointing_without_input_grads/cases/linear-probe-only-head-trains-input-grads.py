# A linear probe (only the head trains), and input grads enabled before checkpointing.
# A frozen model whose head alone trains (a linear probe): the layers need no gradient.
# Input grads enabled before checkpointing a partially unfrozen model.
# ckptlint-case: target-version=transformers=4.46

from transformers import AutoModelForCausalLM

probe = AutoModelForCausalLM.from_pretrained("m")
probe.requires_grad_(False)
probe.lm_head.requires_grad_(True)
probe.gradient_checkpointing_enable()
tuned = AutoModelForCausalLM.from_pretrained("m")
tuned.requires_grad_(False)
for layer in tuned.model.layers[-2:]:
    layer.requires_grad_(True)
tuned.enable_input_require_grads()
tuned.gradient_checkpointing_enable()
for batch in loader:
    probe(**batch).loss.backward()
    tuned(**batch).loss.backward()
