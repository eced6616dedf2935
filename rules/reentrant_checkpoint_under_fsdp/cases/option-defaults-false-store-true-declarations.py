# The option defaults to False (`store_true`), or its declarations disagree.

import argparse
from dataclasses import dataclass
from torch.distributed.fsdp import FullyShardedDataParallel as FSDP
from torch.utils.checkpoint import checkpoint

parser = argparse.ArgumentParser()
parser.add_argument("--use_reentrant", action="store_true")

@dataclass
class Sweep:
    reentrant: bool = True

@dataclass
class Other:
    reentrant: bool = False

def forward(self, x, args, sweep):
    y = checkpoint(self.block, x, use_reentrant=args.use_reentrant)
    return checkpoint(self.block, y, use_reentrant=sweep.reentrant)

model = FSDP(Model())
