# A nested def that rebinds the name itself.

from torch.utils.checkpoint import checkpoint

def forward(self, x):
    for i in range(len(self.layers)):
        def run(t):
            layer = self.layers[0]
            return layer(t)
        x = checkpoint(run, x, use_reentrant=False)
    return x
