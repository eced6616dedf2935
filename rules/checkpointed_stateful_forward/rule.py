from __future__ import annotations

from ckptlint.lazy_libcst import cst

from ckptlint.analysis.region_paths import region_mutations, shown
from ckptlint.analysis.regions import RegionRule
from ckptlint.types import Severity


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
    severity = Severity.ERROR
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
