from __future__ import annotations

from ckptlint.analysis.region_paths import region_unrestored_randomness, shown
from ckptlint.analysis.regions import RegionRule
from ckptlint.types import Severity


class UnrestoredRngInCheckpoint(RegionRule):
    """A checkpointed region draws random numbers that torch's RNG preservation does not replay.

    ## What it does
    Finds checkpointed regions (resolved as CKPT033 resolves them: `checkpoint(self.block,
    x)`, a method, a nested function, a loop over `self.blocks`, `checkpoint_wrapper`,
    `apply_activation_checkpointing(check_fn=...)`, the project's own checkpoint helpers; the
    modules' forwards and the functions they call, across the project's files) whose code
    draws from a generator torch does not save and restore around the recomputation:
    - Python's `random` (`random.random()`, `randint`, `choice`, `shuffle`, `sample`,
      `uniform`, `gauss`, ...), named through imports (`import random as rnd`,
      `from random import random`);
    - NumPy's global generator (`np.random.rand`, `randn`, `randint`, `choice`,
      `permutation`, `binomial`, ...; `from numpy import random`);
    - a NumPy or Python generator of one's own: one the module keeps
      (`self.rng = np.random.default_rng(seed)` then `self.rng.random()` in `forward`), or
      one made in the region without a seed (`np.random.default_rng().integers(...)`);
    - torch sampling with an explicit generator: `torch.rand` / `randn` / `randint` /
      `randperm` / `normal` / `bernoulli` / `multinomial` / ... or `x.uniform_()`,
      `x.bernoulli_()` with `generator=g`.
    It is reported at the checkpoint call, naming the path to each draw and its file:line
    (`Block.forward: `random.random`, Python's RNG (model/blocks.py:31)`).

    Not reported: a draw made outside the region and passed in (fairseq's
    `LayerDropModuleList`, which draws in `__iter__` before the layer is called;
    Hugging Face's `dropout_probability = torch.rand([])` before the checkpointed layer);
    torch's default generator (`torch.rand(...)` without `generator=`, `F.dropout`,
    `nn.Dropout`: CKPT033's concern); draws in branches that cannot run in training
    (`if not self.training:`); a draw behind a probability attribute the instance holds only
    zero in (`self.drop_path > 0 and random.random() < self.drop_path` in blocks built with
    rate 0); seeding (`random.seed`, `np.random.seed`, `torch.manual_seed`), and the draws of
    a global generator the region seeds itself with a seed other than None (transformers'
    BigBird seeds NumPy with its layer's index before drawing its random attention blocks:
    the recomputation draws the same); a generator made in the region with a seed
    (`np.random.default_rng(0)`, `torch.Generator().manual_seed(0)`), which draws the same
    numbers again; a project function that happens to be called `random`; regions that
    cannot be resolved; `generator=` a parameter defaulting to None (diffusers'
    `randn_tensor(shape, generator=None)`), any parameter of a function outside classes, or
    an attribute the instance holds only None in (torch's default generator, or what the
    callers pass, which is not followed). A function outside classes is read call by call
    (its local generators are not followed), and only in files the project index reads.

    ## Why is this bad?
    torch's checkpoint saves and restores only the default CPU generator and the device
    generators (`preserve_rng_state=True`). Recomputation in backward runs the region's code
    again, and every other generator has moved on: a NumPy mask, a noise tensor drawn with
    `generator=g` or a layer-drop decision from `random.random()` comes out different, so the
    gradients belong to another network than the loss (silently), or, with the non-reentrant
    implementation, a region that takes another branch saves a different number of tensors
    and backward raises. The recomputation also advances Python's and NumPy's global
    generators a second time, so the rest of training draws a different stream than without
    checkpointing.

    ## Example
    ```python
    class Block(nn.Module):
        def forward(self, x):
            if self.training and random.random() < self.drop_rate:
                return x  # stochastic depth decided inside the region
            return x + self.mlp(x)

    for block in self.blocks:
        x = checkpoint(block, x, use_reentrant=False)
    ```

    ## Use instead
    Draw the decision outside the region and pass it in (or skip the call), or draw with
    torch's default generator, which checkpoint replays:
    ```python
    for block in self.blocks:
        if self.training and torch.rand([]) < block.drop_rate:
            continue
        x = checkpoint(block, x, use_reentrant=False)
    ```

    ## Fix safety
    No fix: moving the draw changes the program's random stream and its structure.

    ## Evidence
    torch 2.13.0+cpu, numpy 2.4.6 (a script of our own, not kept in the repository): a block
    `tanh(Linear(x))` followed by the randomness below and a residual, run through
    `checkpoint(block, x, use_reentrant=...)` and compared with the same step without
    checkpointing, Python's, NumPy's, torch's and the explicit generator's seeds set alike
    before each run; 20 seeds per implementation (wrong = any parameter or input gradient
    off by more than 1e-6):
    - a NumPy mask (`np.random.rand(*h.shape) > 0.5`): wrong in 20 of 20 steps with
      `use_reentrant=True`, 20 of 20 with `use_reentrant=False`;
    - a mask from `torch.rand(h.shape, generator=g)`: 20 of 20 and 20 of 20;
    - layer-drop, `if random.random() < 0.5: return x` before the block's second layer:
      reentrant silently wrong in 10 of 20 steps; non-reentrant raised in 2 of 20 steps
      `CheckpointError: torch.utils.checkpoint: A different number of tensors was saved
      during the original forward and recomputation.` (where the forward kept the layer and
      the recomputation dropped it; a step whose forward dropped it saves nothing to
      recompute);
    - torch's own `F.dropout(h, 0.5, training=True)` in the same place: 0 of 20 wrong in
      both implementations.
    The recomputation left Python's and NumPy's global generators in another state than the
    unchecked step in 20 of 20 NumPy-mask steps (both implementations) and 20 of 20
    layer-drop steps (reentrant); with torch's dropout, 0 of 20.
    """

    code = "CKPT036"
    severity = Severity.ERROR
    name = "unrestored-rng-in-checkpoint"
    message = "a checkpointed region draws random numbers torch does not replay"

    def check_region(self, node, region, api) -> None:
        paths = region_unrestored_randomness(region, self.context.project)
        if not paths:
            return
        self.report(
            node,
            f"`{api}` recomputes a region that draws random numbers torch's checkpoint does not save or restore "
            f"({shown(paths)}): the recomputation in backward draws different numbers, so gradients belong to "
            "another network than the loss (or backward raises when the region takes another branch); draw "
            "outside the region and pass the result in, or use torch's default generator",
        )
