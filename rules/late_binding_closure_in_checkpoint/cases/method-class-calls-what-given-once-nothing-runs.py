# A method of the class that calls what it is given at once (nothing runs it again).

import torch.nn as nn

class Net(nn.Module):
    def _timed(self, fn, x):
        return fn(x)

    def forward(self, x):
        for layer in self.layers:
            x = self._timed(lambda y: layer(y), x)
        return x
