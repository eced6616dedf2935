"""CKPT002 / CKPT004 evidence (issue 44): FSDP all-gathers in backward, gradients and live tensors
usage: measure.py SCENARIO ; prints one line per rank 0."""
import os, sys, gc, functools, traceback
import torch, torch.distributed as dist, torch.multiprocessing as mp
import torch.nn as nn

COUNT = {"phase": None, "fwd": 0, "bwd": 0}
def patch():
    for name in ("all_gather_into_tensor", "_all_gather_base", "all_gather", "all_gather_single"):
        if hasattr(dist, name):
            orig = getattr(dist, name)
            def wrapped(*a, _orig=orig, **k):
                if COUNT["phase"]:
                    COUNT[COUNT["phase"]] += 1
                return _orig(*a, **k)
            setattr(dist, name, wrapped)
    # FSDP2 may call through torch.ops / c10d directly
    try:
        import torch.distributed.fsdp._fully_shard._fsdp_collectives as coll
        for name in dir(coll):
            pass
    except Exception:
        pass

def tiny(kind):
    import transformers
    torch.manual_seed(0)
    if kind == "llama":
        cfg = transformers.LlamaConfig(vocab_size=64, hidden_size=32, intermediate_size=64, num_hidden_layers=4,
                                       num_attention_heads=4, num_key_value_heads=4, max_position_embeddings=64)
        m = transformers.LlamaForCausalLM(cfg)
        layer = type(m.model.layers[0])
    elif kind == "gpt2":
        cfg = transformers.GPT2Config(vocab_size=64, n_embd=32, n_layer=4, n_head=4, n_positions=64,
                                      resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0)
        m = transformers.GPT2LMHeadModel(cfg)
        layer = type(m.transformer.h[0])
    m.config.use_cache = False
    return m, layer

class Block(nn.Module):
    def __init__(s):
        super().__init__(); s.n = nn.LayerNorm(32); s.a = nn.Linear(32, 128); s.b = nn.Linear(128, 32)
    def forward(s, x): return x + s.b(torch.relu(s.a(s.n(x))))

class Net(nn.Module):
    def __init__(s, reentrant):
        super().__init__(); s.stem = nn.Linear(32, 32); s.blocks = nn.ModuleList(Block() for _ in range(4)); s.head = nn.Linear(32, 1); s.r = reentrant
    def forward(s, x):
        from torch.utils.checkpoint import checkpoint
        h = s.stem(x)
        for b in s.blocks:
            h = checkpoint(b, h, use_reentrant=s.r) if s.r is not None else b(h)
        return s.head(h).sum()

def run(rank, scenario, q):
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=os.environ["PORT"])
    torch.set_num_threads(1)
    dist.init_process_group("gloo", rank=rank, world_size=2)
    patch()
    out = ""
    try:
        out = body(rank, scenario)
    except Exception as e:
        out = "CRASH " + type(e).__name__ + ": " + str(e).splitlines()[0][:200]
    if rank == 0: q.put(out)
    dist.barrier(); dist.destroy_process_group()

def grads_full(model, fsdp):
    from torch.distributed.fsdp import FullyShardedDataParallel as FSDP
    if fsdp == 1:
        with FSDP.summon_full_params(model, with_grads=True):
            return {n.replace("_fsdp_wrapped_module.", "").replace("_checkpoint_wrapped_module.", ""): p.grad.clone() if p.grad is not None else None for n, p in model.named_parameters()}
    return {n: (p.grad.full_tensor() if p.grad is not None else None) for n, p in model.named_parameters()}

def body(rank, scenario):
    # scenario: fsdp{1,2}-{hf_llama,hf_gpt2,torch}-{re,nre}[-oneunit][-steps]
    parts = scenario.split("-")
    fsdp, what, mode = int(parts[0][-1]), parts[1], parts[2]
    oneunit = "oneunit" in parts
    steps = 8 if "steps" in parts else 1
    reentrant = {"re": True, "nre": False}[mode]
    if what.startswith("hf_"):
        model, layer = tiny(what[3:])
        ref, _ = tiny(what[3:])
        model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": reentrant})
        model.train(); ref.train()
        torch.manual_seed(1); ids = torch.randint(0, 64, (4, 16))
        def loss_of(m, x): return m(input_ids=x, labels=x).loss
    else:
        model = Net(reentrant); torch.manual_seed(0); ref = Net(None); ref.load_state_dict(model.state_dict()); layer = Block
        torch.manual_seed(1); ids = torch.randn(4, 32)
        def loss_of(m, x): return m(x)
    ref_loss = loss_of(ref, ids); ref_loss.backward()
    refg = {n: p.grad for n, p in ref.named_parameters()}
    mine = ids[rank * 2:(rank + 1) * 2]
    if fsdp == 1:
        from torch.distributed.fsdp import FullyShardedDataParallel as FSDP, ShardingStrategy
        from torch.distributed.fsdp.wrap import ModuleWrapPolicy
        kw = {} if oneunit else {"auto_wrap_policy": ModuleWrapPolicy({layer})}
        model = FSDP(model, device_id=torch.device("cpu"), use_orig_params=True, sharding_strategy=ShardingStrategy.FULL_SHARD, **kw)
    else:
        from torch.distributed.fsdp import fully_shard
        if not oneunit:
            for m in list(model.modules()):
                if isinstance(m, layer): fully_shard(m)
        fully_shard(model)
    res = []
    mem = []
    for step in range(steps):
        COUNT.update(fwd=0, bwd=0)
        COUNT["phase"] = "fwd"; loss = loss_of(model, mine) / 2 * (2 if False else 1)
        COUNT["phase"] = "bwd"; loss.backward(); COUNT["phase"] = None
        if step == 0:
            g = grads_full(model, fsdp)
            # ref loss is mean over 4 rows (HF) or sum (torch): scale accordingly
            err = 0.0; missing = 0
            for n, r in refg.items():
                key = n
                v = g.get(key)
                if v is None: missing += 1; continue
                scale = 1.0 if what.startswith("hf_") else 1.0
                err = max(err, (v * 2 / 2 - r).abs().max().item() if what.startswith("hf_") else (v - r).abs().max().item())
            chk = sum(float(v.double().abs().sum()) for v in g.values() if v is not None)
            res.append(f"fwd/bwd all-gathers {COUNT['fwd']}/{COUNT['bwd']} maxerr-vs-single {err:.2e} grad-checksum {chk:.6f} missing-grads {missing}")
        for p in model.parameters(): p.grad = None
        gc.collect()
        live = sum(t.numel() * t.element_size() for t in gc.get_objects() if isinstance(t, torch.Tensor) and not isinstance(t, nn.Parameter))
        mem.append(live)
    if steps > 1: res.append("live non-param tensor bytes per step " + ",".join(str(m) for m in mem))
    return "; ".join(res)

if __name__ == "__main__":
    os.environ.setdefault("PORT", str(29000 + os.getpid() % 2000)); ctx = mp.get_context("spawn"); q = ctx.SimpleQueue()
    mp.spawn(run, args=(sys.argv[1], q), nprocs=2, join=True)
    import transformers
    print(f"torch {torch.__version__} transformers {transformers.__version__} {sys.argv[1]}: {q.get()}")
