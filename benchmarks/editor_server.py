"""The editor server on a large project: diagnostics after edits of `transformers/trainer.py`
(a warm server), a generated 116 KB buffer opened beside it (does it delay trainer.py's
diagnostics?), and the server's memory (its own, and its worker processes') before, while
and after that buffer is analysed and closed.

    python benchmarks/editor_server.py ROOT   # ROOT: a copy of transformers' package dir's parent, with a pyproject.toml

`CKPT_TREE` (default: this checkout) is the ckptlint tree the server runs from.
"""
import os, sys, time
from pathlib import Path
os.environ.setdefault("CKPT_TREE", str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, os.environ["CKPT_TREE"])
import tests.lsp_client as lc
lc.SAFETY_TIMEOUT = 900
from tests.lsp_client import LspClient
from ckptlint.server.lsp import DEBOUNCE_SECONDS

ROOT = Path(sys.argv[1]) if len(sys.argv) > 1 else Path("/tmp/tf-copy-server")
TRAINER = ROOT / "transformers" / "trainer.py"

def rss_tree(pid):
    """RSS of the server process alone, and with its children (MiB)."""
    def rss(p):
        try:
            return int(open(f"/proc/{p}/statm").read().split()[1]) * 4096
        except OSError:
            return 0
    kids = []
    try:
        for t in os.listdir(f"/proc/{pid}/task"):
            kids += open(f"/proc/{pid}/task/{t}/children").read().split()
    except OSError:
        pass
    return rss(pid) / 2**20, sum(rss(int(k)) for k in kids) / 2**20

def kids(pid):
    out = []
    for t in os.listdir(f"/proc/{pid}/task"):
        out += open(f"/proc/{pid}/task/{t}/children").read().split()
    return sorted(out)

def cpu_seconds(pids):
    """User and system CPU time of these processes (s): /proc/<pid>/stat, fields 14 and 15."""
    total = 0
    for pid in pids:
        try:
            fields = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        total += int(fields[11]) + int(fields[12])
    return total / os.sysconf("SC_CLK_TCK")

def hostile_text():
    # generated: many names and deep (but < 1000) nesting, about 116 KB, with a checkpoint call
    lines = ["from torch.utils.checkpoint import checkpoint", ""]
    i = 0
    while sum(map(len, lines)) < 116_000:
        depth = 60
        expr = "x" + str(i)
        for d in range(depth):
            expr = f"f{d}({expr}, [{{'k{d}': (a{d}, b{d})}}])"
        lines.append(f"v{i} = {expr}")
        i += 1
    lines.append("def forward(self, x):\n    return checkpoint(self.block, x)\n")
    return "\n".join(lines) + "\n"

def inner_loop_body(lines):
    """The line index of the first statement of `Trainer._inner_training_loop`'s body."""
    start = next(i for i, line in enumerate(lines) if "def _inner_training_loop" in line)
    return next(i for i in range(start, len(lines)) if lines[i].startswith("    )") and lines[i].rstrip().endswith(":")) + 1

def main():
    client = LspClient(ROOT, env={"PYTHONPATH": os.environ["CKPT_TREE"]})
    client.initialize(ROOT)
    text = TRAINER.read_text()
    t0 = time.monotonic()
    uri = client.open(TRAINER, text)
    client.diagnostics(uri)
    print(f"first diagnostics of trainer.py (index built): {time.monotonic() - t0:.2f} s")
    results = {}
    time.sleep(1)  # what follows the first lint (its facts) is done
    workers, cpu_before = kids(client.process.pid), None
    cpu_before = cpu_seconds(workers)
    for n in range(2, 6):
        edited = text + f"\n# edit {n}\n"
        t0 = time.monotonic()
        client.change(uri, edited, n)
        client.diagnostics(uri, version=n)
        print(f"edit {n}: diagnostics after {time.monotonic() - t0:.2f} s (includes the {DEBOUNCE_SECONDS} s debounce); children {kids(client.process.pid)}")
    time.sleep(1)
    print(f"worker CPU for the 4 edits (their lints and the facts that follow): {cpu_seconds(workers) - cpu_before:.2f} s")
    # Statements typed into a method above the DDP wrap (`_inner_training_loop`): each edit
    # shifts the lines of what follows, the facts other files see included.
    lines = text.splitlines(keepends=True)
    body = inner_loop_body(lines)
    workers, cpu_before = kids(client.process.pid), cpu_seconds(kids(client.process.pid))
    for n in range(6, 10):
        typed = [f"        steps_seen_{k} = {k}\n" for k in range(6, n + 1)]
        t0 = time.monotonic()
        client.change(uri, "".join(lines[:body] + typed + lines[body:]), n)
        client.diagnostics(uri, version=n)
        print(f"statement edit {n}: diagnostics after {time.monotonic() - t0:.2f} s; same worker: {kids(client.process.pid) == workers}")
    time.sleep(1)
    if kids(client.process.pid) == workers:
        print(f"worker CPU for the 4 statement edits: {cpu_seconds(workers) - cpu_before:.2f} s")
    else:
        print("worker CPU for the 4 statement edits: not measured (the worker was forked again)")
    client.change(uri, text, 19)
    client.diagnostics(uri, version=19)
    # Typing: a change every 0.4 s, each superseding the lint the one before started.
    workers = kids(client.process.pid)
    for n in range(20, 26):
        client.change(uri, text + f"\n# typing {n}\n", n)
        time.sleep(0.4)
    t0 = time.monotonic()
    client.change(uri, text + "\n# typed\n", 30)
    client.diagnostics(uri, version=30)
    print(f"typing (a change every 0.4 s, 6 times), then one more: its diagnostics after {time.monotonic() - t0:.2f} s; "
          f"same worker throughout: {kids(client.process.pid) == workers}")
    time.sleep(1)
    print("server RSS before hostile (MiB, self/children): %.0f / %.0f" % rss_tree(client.process.pid))
    hostile = ROOT / "generated_tables.py"
    htext = hostile_text()
    print(f"hostile buffer: {len(htext.encode())} bytes")
    t0 = time.monotonic()
    huri = client.open(hostile, htext)
    time.sleep(0.5)
    # while the hostile buffer is analysed, edit trainer.py
    t1 = time.monotonic()
    client.change(uri, text + "\n# during hostile\n", 10)
    client.diagnostics(uri, version=10)
    print(f"trainer.py edit while the hostile buffer is analysed: {time.monotonic() - t1:.2f} s")
    peak = rss_tree(client.process.pid)
    print("server RSS while hostile (MiB, self/children): %.0f / %.0f" % peak)
    hd = client.diagnostics(huri)
    print(f"hostile buffer diagnostics after {time.monotonic() - t0:.2f} s: {[d['code'] for d in hd][:5]} {[d['message'][:90] for d in hd if d['code']=='CKPT900']}")
    print("server RSS after hostile linted (MiB, self/children): %.0f / %.0f" % rss_tree(client.process.pid))
    client.notify("textDocument/didClose", {"textDocument": {"uri": huri}})
    client.diagnostics(huri, lambda d: d == [])
    time.sleep(1.5)
    print("server RSS after closing hostile (MiB, self/children): %.0f / %.0f" % rss_tree(client.process.pid))
    print("exit", client.stop())

main()
