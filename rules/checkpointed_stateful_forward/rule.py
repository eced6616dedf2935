from __future__ import annotations

from ckptlint.lazy_libcst import cst

from ckptlint.analysis.region_paths import region_mutations, shown
from ckptlint.analysis.regions import RegionRule
from ckptlint.rule import Invalid, Valid


class CheckpointedStatefulForward(RegionRule):
    """A checkpointed region mutates state that outlives the call.

    ## What it does
    Finds checkpoint calls whose region (resolved through the project index, across files;
    also a library's checkpointing helper: timm's `checkpoint_seq`, DeepSpeed's
    `deepspeed.checkpointing.checkpoint`, which run their first argument again in backward)
    writes state that outlives the call: an assignment or augmented assignment to
    `self.<attr>` outside `__init__`, an in-place tensor method on a buffer or attribute
    (`self.count.add_(1)`, `mul_`, `copy_`, `fill_`, `zero_`, index assignment),
    `append` / `extend` / `update` / item assignment on a container held by `self`, or a
    `global` / `nonlocal` write, an element added (`append` / `extend` / `insert`) to a list
    the module holds (`ACT.append(...)`, `stats.ACT_NORMS.append(...)` on an imported project
    module; not a name the method binds itself, not a library's such as `sys.path`, not a
    dict or set written by key, which a recomputation writes again with the same value); a
    module wrapped by the legacy `torch.nn.utils.spectral_norm` (its hook updates `weight_u`
    / `weight_v` on every training forward). The message names the write and the path to it.
    A subclass's `super().forward(...)` is followed into its base's forward; a module that a
    guard before the wrapper rules out (`if isinstance(block, MoEBlock): raise ...`, also
    `return`, `continue`, `break`; subclasses included) is not counted, nor is a write under
    `if hasattr(self, "kv_cache"):` in a plain `nn.Module` that never sets that attribute
    itself (an inference cache its generation code attaches), nor one to `self.<cache>` under
    `if key not in self.<cache>:` (a memo the recomputation finds filled).

    ## Why is this bad?
    The recomputation in backward runs the region's forward again: every write happens
    twice per step. Usage counters of MoE routers count double, caches get a second entry,
    EMA statistics move twice, and anything the write feeds back into the computation makes
    the recomputed forward differ from the original one.

    ## Example
    ```python
    class Router(nn.Module):
        def forward(self, x):
            self.calls += 1
            ...

    x = checkpoint(self.router, x, use_reentrant=False)
    ```

    ## Use instead
    Move the bookkeeping out of the checkpointed region (do it once in the caller), or guard
    it so that it cannot run during the recomputation.

    Not reported: writes guarded so they cannot run in training (`if not self.training:`,
    `torch.jit.is_scripting()` branches, or after `if self.training: return ...`), KV-cache
    writes behind `use_cache` (`if use_cache:`, `if self.use_cache and ...`, after `if not
    use_cache: return ...`: under checkpointing in training transformers turns the cache off,
    and CKPT020 reports the loops where it stays on), writes in `__init__`, writes to locals,
    an attribute assigned a literal (`self._warned = True`, `self.cache = None`: the
    recomputation writes the same value again), `clamp_`, `fill_` or `zero_` with literal or
    `self.<attr>` arguments (`self.scale.clamp_(max=self.max_scale)`: the same value again;
    measured on torch 2.13, the gradients of the plain forward with either implementation), an attribute set to a value that does not
    read it and was not read before in its method (`self.modulator = self.h(ctx)`, kept for
    inspection: the recomputation sets it again to the value it computes from the same
    inputs; a counter `self.n = self.n + 1`, also through a local `n = self.n`, or a growing
    cache `self.keys = torch.cat([self.keys, k])` reads itself and is reported;
    writes into objects, `self.cache[k] = v`, `self.stats.n = ...`, are reported too), an
    attribute converted in place of itself
    (`self.attn_mask = self.attn_mask.to(dtype=x.dtype, device=x.device) if self.attn_mask is
    not None else None`, OpenAI CLIP's residual block and its many copies: converting again
    gives the same tensor; `to` / `type` / `float` / `half` / `bfloat16` / `double` / `cuda` /
    `cpu` / `contiguous` / `type_as`), an attribute set only once a check on it
    passes (`if seq_len > self.max_seq_len_cached: self._set_cos_sin_cache(seq_len)` in
    Llama-derived rotary embeddings, `if self.table is None: self.table = ...` or its
    `else:` form, `if self.cache is not None: ... else: ...; self.cache = ...`: the
    recomputation finds the check passed; a counter `self.n = self.n + 1` under `if self.n <
    k:` is still reported), the bound method of an object built in the
    call itself (`checkpoint(Interpreter(gm).run, x)`: nothing else sees its state), a
    checkpoint behind `if self.with_cp` in a class the project builds only with the flag off
    (as CKPT010 says), regions that cannot be resolved. No fix.

    ## Evidence
    torch 2.13 (CPU): a module whose forward does `self.calls += 1`, checkpointed with either
    implementation, ends one training step with `calls == 2` (1 without checkpointing)
    (`tests/test_closure_rules.py`). A `Linear(8, 8)` wrapped by `torch.nn.utils.
    spectral_norm`, checkpointed (non-reentrant): input gradients 0.09 away from the
    unchecked step, `weight_v` 0.26 (the recomputation runs another power iteration); with
    `torch.nn.utils.parametrizations.spectral_norm` (15 iterations at registration) 2e-7 and
    4e-6: not reported. A module whose forward appends to a module-level list, three of
    them checkpointed in a row: 3 entries after the forward, 6 after backward, with either
    implementation.
    """

    code = "CKPT011"
    name = "checkpointed-stateful-forward"
    message = "a checkpointed region mutates state that outlives the call"

    def check_region(self, node, region, api) -> None:
        function = node.args[0].value if node.args and node.args[0].keyword is None and not node.args[0].star else None
        if isinstance(function, cst.Attribute) and isinstance(function.value, cst.Call):
            return  # `checkpoint(Interpreter(gm).run, x)`: an object built for this call alone
        writes = region_mutations(region, self.context.project)
        if not writes:
            return
        self.report(
            node,
            f"`{api}` recomputes a region that writes state outliving the call ({shown(writes)}): "
            "the recomputation in backward repeats every write, so counters, caches and statistics move twice per "
            "step; move the write out of the region or guard it",
        )

    valid = [
        # A memo filled once per key (DiffSynth's rotary tables): the recomputation finds it.
        Valid(
            """
            import torch
            import torch.nn as nn
            from torch.utils.checkpoint import checkpoint

            class Rope(nn.Module):
                def __init__(self):
                    super().__init__()
                    self.freqs = {}

                def forward(self, x):
                    size = x.shape[-1]
                    if size not in self.freqs:
                        self.freqs.update({size: torch.randn(size)})
                    return x * self.freqs[size]

            class Block(nn.Module):
                def __init__(self):
                    super().__init__()
                    self.rope = Rope()

                def forward(self, x):
                    return checkpoint(self.rope, x, use_reentrant=False)
            """
        ),
        # A cache written under `hasattr(self, ...)` that nothing in the class attaches:
        # lingua's attention, whose `kv_cache` only its generation code sets.
        Valid(
            """
            import torch.nn as nn
            from torch.distributed.algorithms._checkpoint.checkpoint_wrapper import checkpoint_wrapper

            class Attention(nn.Module):
                def __init__(self, d=8):
                    super().__init__()
                    self.wk = nn.Linear(d, d)

                def forward(self, x):
                    k = self.wk(x)
                    if hasattr(self, "kv_cache"):
                        k = self.kv_cache.update(k)
                    return k

            model = checkpoint_wrapper(nn.Sequential(Attention()))
            """
        ),
        # An in-place write that gives the same value again (k-diffusion's scale, clamped to
        # a bound the module holds, `fill_(0)`): measured, the gradients of the plain forward.
        Valid(
            """
            import torch
            import torch.nn as nn
            from torch.utils.checkpoint import checkpoint

            class RMSNorm(nn.Module):
                def __init__(self, d, max_scale=2.0):
                    super().__init__()
                    self.scale = nn.Parameter(torch.ones(d))
                    self.max_scale = max_scale
                    self.register_buffer("mask", torch.ones(d))

                @torch.no_grad()
                def proj_(self):
                    self.scale.clamp_(max=self.max_scale)

                def forward(self, x):
                    self.proj_()
                    self.mask.fill_(1.0)
                    return x * torch.exp(0.5 * self.scale) * self.mask

            class Block(nn.Module):
                def __init__(self, d=8):
                    super().__init__()
                    self.norm = RMSNorm(d)

                def forward(self, x):
                    return checkpoint(self.norm, x, use_reentrant=False)
            """
        ),
        # MoE blocks refused by a guard that raises before the wrapper (OLMo-core): only the
        # dense blocks, which write nothing, are wrapped.
        Valid(
            """
            import torch
            import torch.nn as nn
            from torch.distributed.algorithms._checkpoint.checkpoint_wrapper import checkpoint_wrapper

            class MoEBlock(nn.Module):
                def __init__(self, d=16):
                    super().__init__()
                    self.gate = nn.Linear(d, 4)
                    self.register_buffer("seen", torch.zeros(4))

                def forward(self, x):
                    self.seen += self.gate(x).softmax(-1).detach().sum(0)
                    return x

            class SharedMoEBlock(MoEBlock):
                pass

            class DenseBlock(nn.Module):
                def __init__(self, d=16):
                    super().__init__()
                    self.fc = nn.Linear(d, d)

                def forward(self, x):
                    return x + self.fc(x)

            class Net(nn.Module):
                def __init__(self):
                    super().__init__()
                    self.blocks = nn.ModuleList([DenseBlock(), SharedMoEBlock()])

                def apply_checkpointing(self):
                    for i, block in enumerate(self.blocks):
                        if isinstance(block, MoEBlock):
                            raise ValueError("MoE blocks cannot be checkpointed")
                        self.blocks[i] = checkpoint_wrapper(block)
            """
        ),
        # Lists the forward builds itself (one shadowing a module-level name), a module-level
        # cache written by key, and `sys.path`.
        Valid(
            """
            import sys
            import torch.nn as nn
            from torch.utils.checkpoint import checkpoint

            feats = []
            _MASKS = {}

            class Block(nn.Module):
                def __init__(self, d=16):
                    super().__init__()
                    self.fc = nn.Linear(d, d)

                def forward(self, x):
                    feats = []
                    feats.append(x)
                    _MASKS.setdefault(x.shape[-1], x.new_ones(x.shape[-1]))
                    if "." not in sys.path:
                        sys.path.append(".")
                    return x + self.fc(x).relu() * _MASKS[x.shape[-1]] + feats[0]

                def run(self, x):
                    return checkpoint(self, x, use_reentrant=False)
            """
        ),
        # The parametrization starts converged: another iteration changes nothing measurable.
        Valid(
            """
            import torch.nn as nn
            from torch.nn.utils.parametrizations import spectral_norm
            from torch.utils.checkpoint import checkpoint

            class Discriminator(nn.Module):
                def __init__(self):
                    super().__init__()
                    self.conv = spectral_norm(nn.Conv2d(64, 64, 3, padding=1))

                def forward(self, x):
                    return checkpoint(self.conv, x, use_reentrant=False)
            """
        ),
        # A cache set only once its check passes (Llama-derived rotary embeddings, a subclass
        # setting it in the method the check calls): the recomputation finds it set.
        Valid(
            """
            import torch
            import torch.nn as nn
            from torch.utils.checkpoint import checkpoint

            class Rotary(nn.Module):
                def __init__(self, dim):
                    super().__init__()
                    self.dim = dim
                    self.max_seq_len_cached = 0

                def _set_cache(self, seq_len):
                    self.max_seq_len_cached = seq_len
                    self.register_buffer("cos_cached", torch.ones(seq_len, self.dim), persistent=False)

                def forward(self, x, seq_len):
                    if seq_len > self.max_seq_len_cached:
                        self._set_cache(seq_len)
                    return x * self.cos_cached[:seq_len]

            class ScaledRotary(Rotary):
                def _set_cache(self, seq_len):
                    self.max_seq_len_cached = seq_len
                    self.register_buffer("cos_cached", torch.ones(seq_len, self.dim) / 2, persistent=False)

            class Layer(nn.Module):
                def __init__(self):
                    super().__init__()
                    self.rotary = ScaledRotary(8)

                def forward(self, x):
                    return self.rotary(x, x.shape[1])

            def run(layer, x):
                return checkpoint(layer, x, use_reentrant=False)

            run(Layer(), torch.ones(2, 4, 8))
            """
        ),
        # An object built for the call alone: its state is seen by nothing else.
        Valid(
            """
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
            """
        ),
        # GPT-NeoX / Hugging Face style cache writes behind `use_cache` (off in checkpointed
        # training), and a flag guard.
        Valid(
            """
            import torch.nn as nn
            from torch.utils.checkpoint import checkpoint

            class Attention(nn.Module):
                def __init__(self, config):
                    super().__init__()
                    self.use_cache = config.use_cache
                    self.key_cache = []
                    self.proj = nn.Linear(8, 8)

                def _attend(self, x, use_cache=False):
                    if use_cache:
                        self.key_cache.append(x)
                    if self.use_cache and x.shape[0] > 1:
                        self.key_cache.append(x)
                    if not self.use_cache:
                        return self.proj(x)
                    self.key_cache.append(x)
                    return self.proj(x)

                def forward(self, x):
                    return checkpoint(self._attend, x, use_reentrant=False)
            """
        ),
        # A one-shot flag set to a literal: the recomputation writes the same value (only a
        # print is skipped the second time).
        Valid(
            """
            import torch.nn as nn
            from torch.utils.checkpoint import checkpoint

            class Expert(nn.Module):
                def __init__(self):
                    super().__init__()
                    self.proj = nn.Linear(8, 8)
                    self._announced = False

                def _run(self, x):
                    if not self._announced:
                        print("checkpointing the expert")
                        self._announced = True
                    self.cache = None
                    return self.proj(x)

                def forward(self, x):
                    return checkpoint(self._run, x, use_reentrant=False)
            """
        ),
        # CLIP's residual block moves its mask to the input's dtype and device: the
        # recomputation converts it again and writes the same tensor.
        Valid(
            """
            import torch.nn as nn
            from torch.utils.checkpoint import checkpoint_sequential

            class ResidualAttentionBlock(nn.Module):
                def __init__(self, width, attn_mask=None):
                    super().__init__()
                    self.attn = nn.MultiheadAttention(width, 8)
                    self.attn_mask = attn_mask

                def attention(self, x):
                    self.attn_mask = self.attn_mask.to(dtype=x.dtype, device=x.device) if self.attn_mask is not None else None
                    return self.attn(x, x, x, need_weights=False, attn_mask=self.attn_mask)[0]

                def forward(self, x):
                    return x + self.attention(x)

            class Transformer(nn.Module):
                def __init__(self, width, layers):
                    super().__init__()
                    self.resblocks = nn.Sequential(*[ResidualAttentionBlock(width) for _ in range(layers)])

                def forward(self, x):
                    return checkpoint_sequential(self.resblocks, 2, x, use_reentrant=False)
            """
        ),
        # The cache set in the `else:` of a check on it (litgpt's adapter prefix): the
        # recomputation finds it set and reads it.
        Valid(
            """
            import torch.nn as nn
            from torch.utils.checkpoint import checkpoint

            class Prefix(nn.Module):
                def __init__(self):
                    super().__init__()
                    self.wte = nn.Embedding(4, 8)
                    self.kv_cache = None

                def forward(self, x):
                    if self.kv_cache is not None:
                        prefix = self.kv_cache
                    else:
                        prefix = self.wte.weight.sum(0)
                        self.kv_cache = prefix
                    return x + prefix

            class Block(nn.Module):
                def __init__(self):
                    super().__init__()
                    self.prefix = Prefix()

                def forward(self, x):
                    return checkpoint(self.prefix, x, use_reentrant=False)
            """
        ),
        # A value kept for inspection (FocalNet's modulator): the recomputation sets the
        # attribute again to the value it computes from the same inputs; nothing moves twice.
        Valid(
            """
            import torch.nn as nn
            from torch.utils.checkpoint import checkpoint

            class Modulation(nn.Module):
                def __init__(self):
                    super().__init__()
                    self.h = nn.Conv2d(8, 8, 1)
                    self.modulator = None

                def forward(self, x):
                    self.modulator = self.h(x)
                    return x * self.modulator

            class Block(nn.Module):
                def __init__(self):
                    super().__init__()
                    self.modulation = Modulation()

                def forward(self, x):
                    return checkpoint(self.modulation, x, use_reentrant=False)
            """
        ),
        # Writes in __init__, to locals, or guarded out of training.
        Valid(
            """
            import torch.nn as nn
            from torch.utils.checkpoint import checkpoint

            class Attention(nn.Module):
                def __init__(self):
                    super().__init__()
                    self.cache = []
                    self.proj = nn.Linear(8, 8)

                def forward(self, x):
                    y = self.proj(x)
                    if not self.training:
                        self.cache.append(y)
                    scratch = [y]
                    scratch.append(y)
                    return y

            class Block(nn.Module):
                def __init__(self):
                    super().__init__()
                    self.attn = Attention()

                def forward(self, x):
                    return checkpoint(self.attn, x, use_reentrant=False)
            """
        ),
    ]
    invalid = [
        # Under a memo's miss test, a write to something else than the memo still counts.
        Invalid(
            """
            import torch
            import torch.nn as nn
            from torch.utils.checkpoint import checkpoint

            class Rope(nn.Module):
                def __init__(self):
                    super().__init__()
                    self.freqs = {}
                    self.misses = 0

                def forward(self, x):
                    size = x.shape[-1]
                    if size not in self.freqs:
                        self.freqs[size] = torch.randn(size)
                        self.misses += 1
                    return x * self.freqs[size]

            class Block(nn.Module):
                def __init__(self):
                    super().__init__()
                    self.rope = Rope()

                def forward(self, x):
                    return checkpoint(self.rope, x, use_reentrant=False)
            """,
            line=24,
            column=16,
            message_contains="Rope.forward: `self.misses` assigned (line 15))",
        ),
        # The same test, on a cache the class attaches itself.
        Invalid(
            """
            import torch.nn as nn
            from torch.distributed.algorithms._checkpoint.checkpoint_wrapper import checkpoint_wrapper
            from .cache import KVCache

            class Attention(nn.Module):
                def __init__(self, d=8):
                    super().__init__()
                    self.wk = nn.Linear(d, d)
                    self.kv_cache = KVCache(d)

                def forward(self, x):
                    k = self.wk(x)
                    if hasattr(self, "kv_cache"):
                        k = self.kv_cache.update(k)
                    return k

            model = checkpoint_wrapper(nn.Sequential(Attention()))
            """,
            line=17,
            column=9,
            message_contains="`self.kv_cache.update(...)`",
        ),
        # A subclass whose forward runs its base's through `super()`: the base's router writes.
        Invalid(
            """
            import torch
            import torch.nn as nn
            from torch.distributed.algorithms._checkpoint.checkpoint_wrapper import checkpoint_wrapper

            class Router(nn.Module):
                def __init__(self, d=16, experts=4):
                    super().__init__()
                    self.gate = nn.Linear(d, experts)
                    self.register_buffer("seen", torch.zeros(experts))

                def forward(self, x):
                    scores = self.gate(x).softmax(-1)
                    self.seen += scores.detach().sum(0)
                    return scores

            class MoEBlock(nn.Module):
                def __init__(self, d=16):
                    super().__init__()
                    self.router = Router(d)

                def forward(self, x):
                    return x * self.router(x).sum(-1, keepdim=True)

            class NormedMoEBlock(MoEBlock):
                def __init__(self, d=16):
                    super().__init__(d)
                    self.norm = nn.LayerNorm(d)

                def forward(self, x):
                    return super().forward(self.norm(x))

            class Net(nn.Module):
                def __init__(self):
                    super().__init__()
                    self.blocks = nn.ModuleList([NormedMoEBlock(), NormedMoEBlock()])

                def apply_checkpointing(self):
                    for i, block in enumerate(self.blocks):
                        self.blocks[i] = checkpoint_wrapper(block)
            """,
            line=39,
            column=30,
            message_contains="NormedMoEBlock.router -> Router.forward: `self.seen` assigned",
        ),
        # Activation statistics logged into a module-level list (and one of another module).
        Invalid(
            """
            import torch.nn as nn
            from torch.utils.checkpoint import checkpoint

            ACT_NORMS = []

            class Block(nn.Module):
                def __init__(self, d=16):
                    super().__init__()
                    self.fc = nn.Linear(d, d)

                def forward(self, x):
                    ACT_NORMS.append(x.detach().norm().item())
                    return x + self.fc(x).relu()

            class Net(nn.Module):
                def __init__(self):
                    super().__init__()
                    self.blocks = nn.ModuleList([Block(), Block()])

                def forward(self, x):
                    for b in self.blocks:
                        x = checkpoint(b, x, use_reentrant=False)
                    return x
            """,
            line=22,
            column=17,
            message_contains="Block.forward: `ACT_NORMS.append(...)` on a module-level list",
        ),
        # The legacy spectral norm's power iteration runs again in the recomputation.
        Invalid(
            """
            import torch.nn as nn
            from torch.nn.utils import spectral_norm
            from torch.utils.checkpoint import checkpoint

            class Discriminator(nn.Module):
                def __init__(self):
                    super().__init__()
                    self.conv = spectral_norm(nn.Conv2d(64, 64, 3, padding=1))

                def forward(self, x):
                    return checkpoint(self.conv, x, use_reentrant=False)
            """,
            line=11,
            column=16,
            message_contains="Discriminator.conv -> (spectral_norm: its power iteration updates",
        ),
        # A counter under a check on itself still moves twice.
        Invalid(
            """
            import torch.nn as nn
            from torch.utils.checkpoint import checkpoint

            class Warmup(nn.Module):
                def __init__(self):
                    super().__init__()
                    self.fc = nn.Linear(8, 8)
                    self.steps = 0

                def forward(self, x):
                    if self.steps < 100:
                        self.steps = self.steps + 1
                    return self.fc(x)

            class Net(nn.Module):
                def __init__(self):
                    super().__init__()
                    self.warm = Warmup()

                def forward(self, x):
                    return checkpoint(self.warm, x, use_reentrant=False)
            """,
            line=21,
            column=16,
            message_contains="`self.steps` assigned (line 12)",
        ),
        # A counter read into a local first: still read before it is written.
        Invalid(
            """
            import torch.nn as nn
            from torch.utils.checkpoint import checkpoint

            class Scheduled(nn.Module):
                def __init__(self):
                    super().__init__()
                    self.fc = nn.Linear(8, 8)
                    self.calls = 0

                def forward(self, x):
                    calls = self.calls
                    self.calls = calls + 1
                    return self.fc(x)

            class Net(nn.Module):
                def __init__(self):
                    super().__init__()
                    self.inner = Scheduled()

                def forward(self, x):
                    return checkpoint(self.inner, x, use_reentrant=False)
            """,
            line=21,
            column=16,
            message_contains="`self.calls` assigned (line 12)",
        ),
        # A cache that grows with every call: the recomputation appends the same keys again.
        Invalid(
            """
            import torch
            import torch.nn as nn
            from torch.utils.checkpoint import checkpoint

            class Memory(nn.Module):
                def __init__(self):
                    super().__init__()
                    self.fc = nn.Linear(8, 8)
                    self.keys = torch.zeros(0, 8)

                def forward(self, x):
                    self.keys = torch.cat([self.keys, x.detach()])
                    return self.fc(x)

            class Net(nn.Module):
                def __init__(self):
                    super().__init__()
                    self.memory = Memory()

                def forward(self, x):
                    return checkpoint(self.memory, x, use_reentrant=False)
            """,
            line=21,
            column=16,
            message_contains="`self.keys` assigned (line 12)",
        ),
        # An MoE router with a usage counter, checkpointed from the block that owns it.
        Invalid(
            """
            import torch.nn as nn
            from torch.utils.checkpoint import checkpoint

            class Router(nn.Module):
                def __init__(self, experts):
                    super().__init__()
                    self.gate = nn.Linear(8, experts)
                    self.register_buffer("usage", None)

                def forward(self, x):
                    weights = self.gate(x).softmax(-1)
                    self.usage.add_(weights.sum(0).detach())
                    return weights

            class MoE(nn.Module):
                def __init__(self, experts):
                    super().__init__()
                    self.router = Router(experts)

                def forward(self, x):
                    return checkpoint(self.router, x, use_reentrant=False)
            """,
            line=21,
            column=16,
            message_contains="MoE.router -> Router.forward: `self.usage.add_(...)` (line 12)",
        ),
    ]
