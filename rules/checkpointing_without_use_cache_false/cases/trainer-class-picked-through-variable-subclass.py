# A trainer class picked through a variable: the subclass's `loss` runs the policy the base keeps.
# A trainer class picked through a variable, with its base's constructor and loop:
# the subclass's `loss` runs the policy the base keeps.
# ckptlint-case: target-version=transformers=4.46
# ckptlint-case: column=5
# ckptlint-case: message-contains=(by `train` in 

from transformers import AutoModelForCausalLM

class BaseTrainer:
    def __init__(self, accelerator, policy, optimizer):
        self.accelerator = accelerator
        self.policy, self.optimizer = accelerator.prepare(policy, optimizer)

    def train(self, loader):
        for batch in loader:
            self.accelerator.backward(self.loss(batch))
            self.optimizer.step()

class SFTTrainer(BaseTrainer):
    def loss(self, batch):
        return self.policy(**batch).loss

def main(name, accelerator, optimizer, loader):
    trainer_class = SFTTrainer
    policy = AutoModelForCausalLM.from_pretrained(name)
    policy.gradient_checkpointing_enable()  # expect: CKPT020
    trainer_class(accelerator, policy, optimizer).train(loader)
