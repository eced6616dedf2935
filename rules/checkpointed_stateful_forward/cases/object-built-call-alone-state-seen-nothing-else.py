# An object built for the call alone: its state is seen by nothing else.

from torch.utils.checkpoint import checkpoint

class Runner:
    def __init__(self, graph):
        self.graph = graph

    def run(self, *args):
        self.env = {}
        for node in self.graph:
            self.env[node] = node(*args)
        return self.env

def run_checkpointed(graph, *args):
    return checkpoint(Runner(graph).run, *args, use_reentrant=False)
