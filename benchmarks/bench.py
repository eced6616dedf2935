"""ckptlint against its peers on real code: the Python sources of the installed `torch` and
`transformers` packages (about 5,000 files, 2.3 million lines nobody here wrote).

    python benchmarks/bench.py                 # torch + transformers
    python benchmarks/bench.py --packages transformers --repeat 3
    python benchmarks/bench.py --subset-only --repeat 3   # the checkpoint-heavy subset alone

TorchFix 0.7 requires libcst < 1.6; installed beside ckptlint it holds ckptlint back to that
libcst (whose parser is about 20% slower than the 1.9 a fresh install of ckptlint gets). Give
it a virtual environment of its own and name its Python:

    python3 -m venv /tmp/torchfix && /tmp/torchfix/bin/pip install torchfix==0.7.0
    python benchmarks/bench.py --subset-only --repeat 3 --torchfix-python /tmp/torchfix/bin/python

The sources are copied into a scratch directory first (so ckptlint's cache and the
one-file edit never touch site-packages), then, in one run on the same files:

- the checkpoint-heavy subset (when torch and transformers are both benchmarked): the 49
  files where checkpointing is implemented and used (torch's `distributed/fsdp`,
  `distributed/algorithms/_checkpoint` and `utils/checkpoint.py`; transformers'
  `models/llama`, `models/bert`, `models/vit`, `modeling_utils.py`, `trainer.py`), ckptlint
  cold and TorchFix: the code where ckptlint does the most work per line
- ckptlint cold: a fresh cache directory (everything parsed, the cache written)
- ckptlint warm: the same cache, nothing changed
- ckptlint warm, one file touched: one file edited (a transformers model, so the edit is
  linted for real), everything else from the cache; then that one file alone, as
  pre-commit runs it
- ckptlint --version, and one small file with a checkpoint call, without cache
- TorchFix (`torchfix --select TOR003`, the other tool with a checkpoint rule), if installed
  (here or for `--torchfix-python`)
- `grep -rl checkpoint`: the floor of reading the files

Each tool runs as a subprocess; wall time, files/s and the peak resident memory of its
process tree (`wait4`) are reported, with ratios. ckptlint runs with Python's bytecode
cache on, as an installed package does (`PYTHONDONTWRITEBYTECODE` is dropped from its
environment). The run fails (exit 1) if ckptlint reports an internal error for any file.
Nothing is imported from torch or transformers: their locations come from
`importlib.util.find_spec`.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import platform
import re
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class Timing:
    name: str
    seconds: float
    peak_rss_mb: float
    returncode: int
    stdout: str
    stderr: str


def package_dir(name: str) -> Path:
    spec = importlib.util.find_spec(name)
    if spec is None or not spec.submodule_search_locations:
        raise SystemExit(f"package {name!r} is not installed")
    return Path(next(iter(spec.submodule_search_locations)))


# The checkpoint-heavy subset: package -> the directories and files it takes from it.
CHECKPOINT_HEAVY = {
    "torch": ("distributed/fsdp", "distributed/algorithms/_checkpoint", "utils/checkpoint.py"),
    "transformers": ("models/llama", "models/bert", "models/vit", "modeling_utils.py", "trainer.py"),
}


def copy_sources(packages: list[str], destination: Path, only: dict[str, tuple[str, ...]] | None = None) -> tuple[int, int]:
    """Copy every .py file of the packages (or, with `only`, of the named parts of each);
    returns (files, lines)."""
    files = lines = 0
    for name in packages:
        source = package_dir(name)
        parts = [source / part for part in only[name]] if only is not None else [source]
        for path in sorted(p for part in parts for p in ([part] if part.is_file() else part.rglob("*.py"))):
            if not path.is_file():
                continue
            target = destination / name / path.relative_to(source)
            target.parent.mkdir(parents=True, exist_ok=True)
            data = path.read_bytes()
            target.write_bytes(data)
            shutil.copystat(path, target)  # an installed tree's files are not new
            files += 1
            lines += data.count(b"\n")
    return files, lines


# As an installed package runs: with its bytecode cached.
ENVIRONMENT = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
SMALL_FILE = """\
import torch
from torch.utils.checkpoint import checkpoint


class Block(torch.nn.Module):
    def forward(self, x):
        return checkpoint(self.mlp, x, use_reentrant=False)
"""


def run(name: str, command: list[str], cwd: Path) -> Timing:
    with tempfile.TemporaryFile("w+") as out, tempfile.TemporaryFile("w+") as err:
        start = time.perf_counter()
        process = subprocess.Popen(command, cwd=cwd, stdout=out, stderr=err, text=True, env=ENVIRONMENT)
        # wait4 reaps the child itself and gives its resource usage; ru_maxrss covers the
        # largest of the child and the workers it waited for (KiB on Linux).
        _, status, usage = os.wait4(process.pid, 0)
        elapsed = time.perf_counter() - start
        process.returncode = os.waitstatus_to_exitcode(status)
        out.seek(0)
        err.seek(0)
        return Timing(name, elapsed, usage.ru_maxrss / 1024, process.returncode, out.read(), err.read())


def timed(name: str, command: list[str], cwd: Path, repeat: int) -> Timing:
    runs = [run(name, command, cwd) for _ in range(repeat)]
    best = min(runs, key=lambda t: t.seconds)
    return Timing(name, best.seconds, max(t.peak_rss_mb for t in runs), best.returncode, best.stdout, best.stderr)


def torchfix_command(args: argparse.Namespace) -> list[str] | None:
    """How TorchFix runs: with `--torchfix-python`, that interpreter (a virtual environment
    of its own: TorchFix 0.7 requires libcst < 1.6, and installing it beside ckptlint would
    hold ckptlint back to that libcst, whose parser is about 20% slower than the 1.9 a fresh
    `pip install ckptlint` gets); else this one, if TorchFix is installed here."""
    if args.no_torchfix:
        return None
    python = args.torchfix_python or sys.executable
    probe = subprocess.run([python, "-c", "import torchfix"], capture_output=True)
    if probe.returncode != 0:
        print(f"torchfix is not installed for {python} (pip install torchfix==0.7.0): not compared", file=sys.stderr)
        return None
    return [python, "-m", "torchfix", "--select", "TOR003"]


def libcst_version(python: str) -> str:
    found = subprocess.run([python, "-c", "import importlib.metadata as m; print(m.version('libcst'))"],
                           capture_output=True, text=True)
    return found.stdout.strip() or "?"


def internal_errors(timing: Timing) -> list[str]:
    return [line for line in timing.stderr.splitlines() if "internal error" in line]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--packages", nargs="+", default=["torch", "transformers"])
    parser.add_argument("--repeat", type=int, default=1, help="runs per measurement (the best is reported)")
    parser.add_argument("--jobs", type=int, default=None, help="ckptlint --jobs (default: the cores)")
    parser.add_argument("--json", type=Path, help="also write the results as JSON")
    parser.add_argument("--no-torchfix", action="store_true", help="skip TorchFix (it takes minutes per 1,000 files)")
    parser.add_argument("--subset-only", action="store_true", help="only the checkpoint-heavy subset (cold, TorchFix)")
    parser.add_argument("--check-cold", action="store_true", help="after the edits, compare the findings with a "
                        "cold run's (--no-cache)")
    parser.add_argument("--torchfix-python", help="the Python of a virtual environment where TorchFix is installed "
                        "(default: this one); keeps TorchFix's libcst < 1.6 out of ckptlint's environment")
    args = parser.parse_args()
    args.torchfix = torchfix_command(args)
    print(f"libcst: ckptlint {libcst_version(sys.executable)}"
          + (f", TorchFix {libcst_version(args.torchfix[0])}" if args.torchfix else ""), file=sys.stderr)

    scratch = Path(tempfile.mkdtemp(prefix="ckptlint-bench-"))
    try:
        subset = None
        if set(CHECKPOINT_HEAVY) <= set(args.packages):
            subset = bench_subset(scratch / "subset", args)
            if args.subset_only:
                report_subset(subset)
                return 1 if subset.failed else 0
        elif args.subset_only:
            raise SystemExit("the subset takes files from both torch and transformers")
        tree = scratch / "tree"
        files, lines = copy_sources(args.packages, tree)
        # A project root of its own, so nothing above the scratch directory is indexed.
        (tree / "pyproject.toml").write_text("[project]\nname = 'bench'\n")
        # ckptlint does not trust the stat of what changed in the last 2 s (another write in
        # the same timestamp tick would go unseen): a tree just copied is re-read until then.
        time.sleep(2.1)
        cache = scratch / "cache"
        uncached = [sys.executable, "-m", "ckptlint", "check", "--exit-zero", "--output-format", "json"]
        if args.jobs:
            uncached += ["--jobs", str(args.jobs)]
        ckptlint = [*uncached, "--cache-dir", str(cache)]
        targets = list(args.packages)
        results: list[Timing] = []

        colds = []
        for _ in range(args.repeat):
            shutil.rmtree(cache, ignore_errors=True)
            colds.append(run("ckptlint cold", ckptlint + targets, tree))
        best = min(colds, key=lambda t: t.seconds)
        results.append(Timing(best.name, best.seconds, max(t.peak_rss_mb for t in colds), best.returncode,
                              best.stdout, best.stderr))
        results.append(timed("ckptlint warm", ckptlint + targets, tree, args.repeat))
        touched = one_file_to_touch(tree, targets)
        touched.write_text(touched.read_text(encoding="utf-8", errors="replace") + "\n# touched by the benchmark\n")
        results.append(timed("ckptlint warm, 1 file touched", ckptlint + targets, tree, 1))
        print(f"touched: {touched.relative_to(tree)}", file=sys.stderr)
        for name, edit in structural_edits(tree, touched):
            edit()
            before = result_stamps(cache)
            results.append(timed(name, ckptlint + targets, tree, 1))
            relinted = sum(1 for path, stamp in result_stamps(cache).items() if before.get(path) != stamp)
            print(f"{name}: {relinted} files linted again", file=sys.stderr)
        if args.check_cold:
            incremental = results[-1].stdout
            cold = run("ckptlint cold, after the edits", [*uncached, "--no-cache", *targets], tree)
            same = cold.stdout == incremental
            print(f"findings after the edits {'equal' if same else 'DIFFER FROM'} a cold run's", file=sys.stderr)
            if not same:
                return 1
        touched.write_text(touched.read_text(encoding="utf-8") + "# and again\n")
        single = [*ckptlint, str(touched.relative_to(tree))]
        results.append(timed("ckptlint, that one file (edited)", single, tree, 1))
        results.append(timed("ckptlint --version", [sys.executable, "-m", "ckptlint", "--version"], tree, 3))
        small = scratch / "small" / "block.py"
        small.parent.mkdir()
        small.write_text(SMALL_FILE)
        results.append(
            timed("ckptlint, one small file (no cache)", [sys.executable, "-m", "ckptlint", "--no-cache", str(small)], small.parent, 3)
        )

        if args.torchfix is not None:
            results.append(timed("torchfix --select TOR003", [*args.torchfix, *targets], tree, args.repeat))
        else:
            print("TorchFix not compared", file=sys.stderr)
        grep = shutil.which("grep")
        if grep:
            results.append(timed("grep -rl checkpoint", [grep, "-rl", "checkpoint", *targets], tree, args.repeat))

        errors = [e for t in results if t.name.startswith("ckptlint") for e in internal_errors(t)]
        bad_exit = [t.name for t in results if t.name.startswith("ckptlint") and t.returncode != 0]
        findings = len(json.loads(results[0].stdout or "[]"))
        if subset is not None:
            report_subset(subset)
            print()
        report(results, files, lines, findings)
        if args.json:
            args.json.write_text(json.dumps(
                {"machine": machine(), "files": files, "lines": lines, "findings": findings,
                 "results": [{"name": t.name, "seconds": t.seconds, "peak_rss_mb": t.peak_rss_mb} for t in results],
                 **({"subset": subset.as_json()} if subset is not None else {})},
                indent=2,
            ))
        if (subset is not None and subset.failed) or errors or bad_exit:
            print(f"\nFAILED: {len(errors)} internal errors, non-zero exits: {bad_exit}", file=sys.stderr)
            for line in errors[:20]:
                print("  " + line, file=sys.stderr)
            return 1
        return 0
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


@dataclass(frozen=True)
class SubsetResults:
    files: int
    lines: int
    findings: int
    timings: tuple[Timing, ...]

    @property
    def failed(self) -> bool:
        mine = [t for t in self.timings if t.name.startswith("ckptlint")]
        return any(t.returncode != 0 or internal_errors(t) for t in mine)

    def as_json(self) -> dict:
        return {"files": self.files, "lines": self.lines, "findings": self.findings,
                "results": [{"name": t.name, "seconds": t.seconds, "peak_rss_mb": t.peak_rss_mb} for t in self.timings]}


def median_run(name: str, command: list[str], cwd: Path, repeat: int, before=None) -> Timing:
    """The median of `repeat` runs (`before` runs ahead of each, e.g. to empty the cache)."""
    runs = []
    for _ in range(max(repeat, 1)):
        if before is not None:
            before()
        runs.append(run(name, command, cwd))
    middle = sorted(runs, key=lambda t: t.seconds)[len(runs) // 2]
    return Timing(name, middle.seconds, max(t.peak_rss_mb for t in runs), middle.returncode, middle.stdout, middle.stderr)


def bench_subset(tree: Path, args: argparse.Namespace) -> SubsetResults:
    """ckptlint cold (a fresh cache each run) and TorchFix on the checkpoint-heavy subset;
    the median of `--repeat` runs of each (a few seconds each, so one run is noise)."""
    files, lines = copy_sources(list(CHECKPOINT_HEAVY), tree, CHECKPOINT_HEAVY)
    (tree / "pyproject.toml").write_text("[project]\nname = 'bench-subset'\n")
    time.sleep(2.1)  # as for the whole tree: a tree just copied is re-read until then
    cache = tree.parent / "subset-cache"
    command = [sys.executable, "-m", "ckptlint", "check", "--exit-zero", "--output-format", "json", "--cache-dir", str(cache)]
    if args.jobs:
        command += ["--jobs", str(args.jobs)]
    command += list(CHECKPOINT_HEAVY)
    cold = median_run("ckptlint cold, subset", command, tree, args.repeat, lambda: shutil.rmtree(cache, ignore_errors=True))
    timings = [cold]
    if args.torchfix is not None:
        torchfix = [*args.torchfix, *CHECKPOINT_HEAVY]
        timings.append(median_run("torchfix --select TOR003, subset", torchfix, tree, args.repeat))
    return SubsetResults(files, lines, len(json.loads(cold.stdout or "[]")), tuple(timings))


def report_subset(subset: SubsetResults) -> None:
    print(f"checkpoint-heavy subset: {subset.files} Python files, {subset.lines:,} lines; "
          f"ckptlint findings: {subset.findings} (medians)")
    print(f"{'tool':38} {'wall s':>8} {'files/s':>9} {'peak MB':>8}")
    for t in subset.timings:
        print(f"{t.name:38} {t.seconds:8.2f} {subset.files / t.seconds:9.0f} {t.peak_rss_mb:8.0f}")
    if len(subset.timings) == 2:
        print(f"TorchFix / ckptlint cold, subset:   {subset.timings[1].seconds / subset.timings[0].seconds:6.1f}x")


def structural_edits(tree: Path, touched: Path) -> list[tuple[str, object]]:
    """Edits that change what the index knows of a file (its exported facts), each applied
    before the run that measures it: a new module-level function in the touched model, a
    new statement in a `forward` of it, a new module, and a changed base class in a module
    every model shares (when transformers is benchmarked), whose dependents are linted
    again."""

    def append_function() -> None:
        touched.write_text(touched.read_text(encoding="utf-8") + "\n\ndef bench_helper(x):\n    return x + 1\n")

    def statement_in_forward() -> None:
        text = touched.read_text(encoding="utf-8")
        match = re.search(r"\n( +)def forward\(self[^\n]*\n(?:\1 [^\n]*\n)*?(\1 +)(?=\S)", text)
        if match is None:
            raise SystemExit(f"no forward in {touched}")
        at = match.end()
        touched.write_text(text[:at] + "bench_counter = 1\n" + match.group(2) + text[at:])

    def new_module() -> None:
        (touched.parent / "bench_new_module.py").write_text("def bench_new(x):\n    y = x * 2\n    return y\n")

    edits = [
        ("ckptlint warm, a new function", append_function),
        ("ckptlint warm, a statement in a forward", statement_in_forward),
        ("ckptlint warm, a new module", new_module),
    ]
    shared = tree / "transformers" / "modeling_layers.py"
    if shared.is_file() and "class GradientCheckpointingLayer(nn.Module):" in shared.read_text(encoding="utf-8"):
        def change_base() -> None:
            text = shared.read_text(encoding="utf-8")
            shared.write_text(text.replace(
                "class GradientCheckpointingLayer(nn.Module):", "class GradientCheckpointingLayer(nn.Module, object):"
            ))

        edits.append(("ckptlint warm, a base class changed in a shared module", change_base))
    return edits


def result_stamps(cache: Path) -> dict[str, object]:
    """Each cached result's revision stamp (`ckptlint.cache.ResultCache`): a file whose
    stamp a run changed was linted again in it."""
    stamps: dict[str, object] = {}
    for path in cache.glob("*/*.json"):
        try:
            entries = json.loads(path.read_text()).get("files", {})
        except (OSError, ValueError):
            continue
        for name, entry in entries.items():
            if isinstance(entry, dict) and "diagnostics" in entry:
                stamps[f"{path.name}:{name}"] = (entry.get("revision"), entry.get("key"))
    return stamps


def one_file_to_touch(tree: Path, targets: list[str]) -> Path:
    """A file the edit makes ckptlint lint for real: Llama's model when transformers is
    benchmarked, else the first file that mentions checkpointing."""
    llama = tree / "transformers" / "models" / "llama" / "modeling_llama.py"
    if llama.is_file() and "transformers" in targets:
        return llama
    for target in targets:
        for path in sorted((tree / target).rglob("*.py")):
            if b"checkpoint" in path.read_bytes():
                return path
    return next((tree / targets[0]).rglob("*.py"))


def machine() -> str:
    return f"{platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}, {platform.system()}"


def report(results: list[Timing], files: int, lines: int, findings: int) -> None:
    by_name = {t.name: t for t in results}
    print(f"machine: {machine()}")
    print(f"files:   {files} Python files, {lines:,} lines; ckptlint findings: {findings}\n")
    print(f"{'tool':38} {'wall s':>8} {'files/s':>9} {'peak MB':>8}")
    for t in results:
        whole_tree = not any(word in t.name for word in ("one file", "--version", "small"))
        rate = f"{files / t.seconds:9.0f}" if whole_tree else f"{'':9}"
        print(f"{t.name:38} {t.seconds:8.2f} {rate} {t.peak_rss_mb:8.0f}")
    cold, warm = by_name["ckptlint cold"], by_name["ckptlint warm"]
    print()
    if "torchfix --select TOR003" in by_name:
        print(f"TorchFix / ckptlint cold:           {by_name['torchfix --select TOR003'].seconds / cold.seconds:6.1f}x")
    if "grep -rl checkpoint" in by_name:
        print(f"ckptlint warm / grep:               {warm.seconds / by_name['grep -rl checkpoint'].seconds:6.1f}x")
    print(f"ckptlint cold / warm:               {cold.seconds / warm.seconds:6.1f}x")
    print(f"one touched file, whole tree:       {by_name['ckptlint warm, 1 file touched'].seconds:6.2f} s")
    print(f"one touched file, alone:            {by_name['ckptlint, that one file (edited)'].seconds:6.2f} s")


if __name__ == "__main__":
    sys.exit(main())
