# A subclass that turns the cache off before its base's constructor keeps the policy.
# ckptlint-case: target-version=transformers=4.46

from transformers import AutoModelForCausalLM

class BaseTrainer:
    def __init__(self, accelerator, policy, optimizer):
        self.accelerator = accelerator
        self.policy, self.optimizer = accelerator.prepare(policy, optimizer)

    def train(self, loader):
        for batch in loader:
            self.accelerator.backward(self.policy(**batch).loss)
            self.optimizer.step()

class CachelessTrainer(BaseTrainer):
    def __init__(self, accelerator, policy, optimizer):
        policy.config.use_cache = False
        super().__init__(accelerator, policy, optimizer)

def main(name, accelerator, optimizer, loader):
    policy = AutoModelForCausalLM.from_pretrained(name)
    policy.gradient_checkpointing_enable()
    CachelessTrainer(accelerator, policy, optimizer).train(loader)
