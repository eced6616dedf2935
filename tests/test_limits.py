"""No file can stall or exhaust a run: the size limit applies before any work, the time and
memory limits hold for native code (the worker holding the file is killed), and each
stopped file is CKPT900 with the reason while the run goes on over the others, cold or
warm, with one worker or several, for the index extraction as for the lint. The caches
serve `--fix`, `--diff` and recipes too."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

import ckptlint.indexing
import ckptlint.model.file_facts.extraction
import ckptlint.runner
from conftest import CallLog, json_findings

IMPORT = "from torch.utils.checkpoint import checkpoint\n"
GOOD = IMPORT + "def f(block, x):\n    return checkpoint(block, x)\n"  # CKPT001 at 3:12
# Under the depth limit, but seconds of libcst's native parser (quadratic in call chains).
SLOW_NATIVE = IMPORT + ("y = f" + "(a)" * 900 + "\n") * 8 + "checkpoint(f, x)\n"
DEEP = IMPORT + "y = " + "+".join(["1"] * 5000) + "\ncheckpoint(f, x)\n"
# libcst's scope analysis is quadratic in rebindings of one name: hundreds of MiB.
# 30,003 syntax nodes for the estimate (146 MiB); the comment lines are nodes of libcst's tree
# only, so the analysis needs more than the estimate says: about 300 MiB with libcst 1.9 (whose
# trees are smaller than 1.5's: 60,000 comment lines, enough there, stay under 200 MiB). The
# comments lead each statement: a finding's position generates its statement's code, leading
# comments included (250,000 after the last statement would be generated for none).
MEMORY_HUNGRY = IMPORT + ("#\n" * 83 + "x = checkpoint(layer, x)\n") * 3000
PYPROJECT = "[project]\nname = 'demo'\n"
# The time limit the tests set: SLOW_NATIVE needs about 10 s of CPU, the good files well under
# 0.1 s, so a loaded CI machine neither lets the slow file finish nor stops a good one.

TIME_STOP = "analysis stopped after 2.5 s (the per-file time limit, CKPTLINT_FILE_TIME_LIMIT)"
DEPTH_STOP = (
    "too deeply nested to analyse: an expression 5,002 levels deep (a generated chain of operators, "
    "attributes or calls?); ckptlint analyses up to 1,000 levels"
)


def size_stop(size: str, limit: str) -> str:
    return (
        f"too large to analyse: {size} is more than the {limit} ckptlint analyses "
        "(generated code? exclude it, or raise CKPTLINT_FILE_SIZE_LIMIT)"
    )


@pytest.fixture
def limits(monkeypatch):
    def set_limits(**values: str) -> None:
        for name, value in values.items():
            monkeypatch.setenv(f"CKPTLINT_FILE_{name.upper()}_LIMIT", value)

    return set_limits


def run_json(cli, root: Path, *args: str):
    result = cli(["--output-format", "json", *args], root)
    assert "Traceback" not in result.stderr, result.stderr
    return result, json_findings(result, root, with_message=True)


@pytest.mark.parametrize("jobs", ["1", "2"])
def test_pathological_files_are_ckpt900_and_the_run_goes_on(cli, make_project, limits, jobs):
    ordinary = {f"pkg/m{index:02d}.py": GOOD for index in range(70)}  # enough for several workers
    big = IMPORT + "# padding\n" * 12000  # 120 KiB, mentions checkpoint
    root = make_project(
        {
            **ordinary,
            "deep.py": DEEP,
            "slow.py": SLOW_NATIVE,
            "generated.py": big,
            "table.py": "TABLE = [\n" + "    (1, 2, 3),\n" * 9000 + "]\n",  # large, no checkpointing
        },
        pyproject=PYPROJECT,
    )
    limits(time="2.5", size="0.1")
    result, found = run_json(cli, root, "--no-cache", "--jobs", jobs, ".")
    assert result.exit_code == 1
    stopped = [item for item in found if item[3] == "CKPT900"]
    assert stopped == [
        ("deep.py", 1, 1, "CKPT900", DEPTH_STOP),
        ("generated.py", 1, 1, "CKPT900", size_stop("117 KiB", "102 KiB")),
        ("slow.py", 1, 1, "CKPT900", TIME_STOP),
    ]
    assert [item[:4] for item in found if item[3] != "CKPT900"] == [
        (f"pkg/m{index:02d}.py", 3, 12, "CKPT001") for index in range(70)
    ]
    assert result.stderr == ""  # the large table is no finding, and no warning either


def test_a_warm_run_answers_from_the_cache_until_the_limits_change(cli, make_project, limits, record_calls):
    root = make_project({"slow.py": SLOW_NATIVE, "deep.py": DEEP, "model.py": GOOD}, pyproject=PYPROJECT)
    linted = record_calls(ckptlint.runner, "lint_text", lambda text, path, *args, **kwargs: Path(path).name)
    limits(time="2.5")
    cold, cold_found = run_json(cli, root, ".")
    assert sorted(linted) == ["deep.py", "model.py", "slow.py"]
    assert [(item[0], item[3]) for item in cold_found] == [
        ("deep.py", "CKPT900"), ("model.py", "CKPT001"), ("slow.py", "CKPT900"),
    ]  # fmt: skip
    linted.clear()
    warm, warm_found = run_json(cli, root, ".")
    assert (warm.exit_code, warm_found, list(linted)) == (1, cold_found, [])
    # Under other limits, a file stopped at a limit may finish: everything is analysed again.
    limits(time="2.6")
    run_json(cli, root, ".")
    assert sorted(linted) == ["deep.py", "model.py", "slow.py"]


@pytest.mark.skipif(not Path("/proc/self/statm").exists(), reason="worker memory is read from /proc")
def test_a_file_past_the_memory_limit_is_ckpt900(cli, make_project, limits):
    root = make_project({"hungry.py": MEMORY_HUNGRY, "model.py": GOOD}, pyproject=PYPROJECT)
    limits(memory="200")  # its 30,000 syntax nodes are estimated below that; it needs more
    result, found = run_json(cli, root, "--no-cache", ".")
    assert found == [
        (
            "hungry.py", 1, 1, "CKPT900",
            "too large to analyse: the analysis needed more than 200 MiB of memory (the per-file memory limit, "
            "CKPTLINT_FILE_MEMORY_LIMIT)",
        ),
        ("model.py", 3, 12, "CKPT001", found[1][4]),
    ]  # fmt: skip
    # A file whose syntax tree alone is estimated over the limit is not even given to libcst.
    limits(memory="100")
    _, found = run_json(cli, root, "--no-cache", "hungry.py")
    assert found == [
        (
            "hungry.py", 1, 1, "CKPT900",
            "too large to analyse: 30,003 syntax nodes would need about 146 MiB of memory, more than the "
            "per-file memory limit of 100 MiB (CKPTLINT_FILE_MEMORY_LIMIT)",
        )
    ]  # fmt: skip


def test_standard_input_has_the_same_limits(cli, tmp_path, limits):
    (tmp_path / "pyproject.toml").write_text(PYPROJECT)
    limits(time="2.5", size="0.1")
    for source, message in (
        (SLOW_NATIVE, TIME_STOP),
        (DEEP, DEPTH_STOP),
        (IMPORT + "#\n" * 60000, size_stop("117 KiB", "102 KiB")),
    ):
        result = cli(["--output-format", "json", "-", "--stdin-filename", "model.py"], tmp_path, input=source)
        assert "Traceback" not in result.stderr
        [item] = json.loads(result.stdout)
        assert (item["code"], item["message"], result.exit_code) == ("CKPT900", message, 1)


def test_an_index_extraction_past_the_limit_costs_that_file_its_facts_only(
    cli, make_project, limits, monkeypatch, tmp_path_factory
):
    """The index extraction runs under the same limits: a file it cannot finish has no
    facts (the run goes on), and a warm run under the same limits does not try again."""
    extracted = CallLog(tmp_path_factory.mktemp("calls") / "extract.log")
    original = ckptlint.model.file_facts.extraction.extract_facts

    def stalling(text, relative):
        extracted.record(relative)
        if relative == "stalls.py":
            time.sleep(600)  # in a worker, which is killed at the limit
        return original(text, relative)

    monkeypatch.setattr(ckptlint.model.file_facts.extraction, "extract_facts", stalling)
    root = make_project({"stalls.py": GOOD, "model.py": GOOD}, pyproject=PYPROJECT)
    limits(time="2.5")
    _, found = run_json(cli, root, ".")
    assert [item[:4] for item in found] == [("model.py", 3, 12, "CKPT001"), ("stalls.py", 3, 12, "CKPT001")]
    assert sorted(extracted) == ["model.py", "stalls.py"]
    extracted.clear()
    (root / "model.py").write_text(GOOD + "# edited\n")
    run_json(cli, root, ".")
    assert list(extracted) == ["model.py"]  # not stalls.py again


@pytest.mark.parametrize(
    "name, value, message",
    [
        ("TIME", "soon", "CKPTLINT_FILE_TIME_LIMIT must be a positive number of seconds, got 'soon'"),
        ("MEMORY", "-5", "CKPTLINT_FILE_MEMORY_LIMIT must be a positive number of MiB, got '-5'"),
        ("SIZE", "0", "CKPTLINT_FILE_SIZE_LIMIT must be a positive number of MiB, got '0'"),
        ("SIZE", "inf", "CKPTLINT_FILE_SIZE_LIMIT must be a positive number of MiB, got 'inf'"),
    ],
)
def test_a_bad_limit_is_a_configuration_error(cli, make_project, limits, name, value, message):
    root = make_project({"model.py": GOOD}, pyproject=PYPROJECT)
    limits(**{name.lower(): value})
    result = cli(["."], root)
    assert (result.exit_code, result.stdout, result.stderr) == (2, "", f"error: {message}\n")


def test_the_index_never_reads_a_file_over_the_size_limit(make_project):
    from ckptlint.config import Settings
    from ckptlint.indexing import build_index
    from ckptlint.limits import AnalysisLimits

    fsdp = "from torch.distributed.fsdp import FullyShardedDataParallel as FSDP\nmodel = FSDP(model)\n"
    root = make_project({"small.py": fsdp, "big.py": fsdp + "#\n" * 60000}, pyproject=PYPROJECT)
    index = build_index(root, Settings.default(root), use_cache=False, limits=AnalysisLimits(file_bytes=100_000))
    assert sorted(index.digests) == ["small.py"]
    assert [use.path for use in index.fsdp_uses] == ["small.py"]


# --- caches for --fix, --diff and recipes ------------------------------------------------

FIXABLE = IMPORT + "def f(block, x, m):\n    return checkpoint(block, x, mask=m)\n"  # CKPT032, a safe fix


def test_fix_and_diff_reuse_results_with_nothing_to_fix(cli, make_project, record_calls):
    root = make_project({"clean.py": "x = 1\n", "unsafe_only.py": GOOD, "fixable.py": FIXABLE}, pyproject=PYPROJECT)
    analysed = record_calls(ckptlint.runner, "check_decoded", lambda decoded, path, *args, **kwargs: Path(path).name)
    cli(["."], root)
    analysed.clear()
    diff = cli(["--diff", "."], root)
    assert diff.exit_code == 1 and "+++ b/fixable.py" in diff.stdout
    assert list(analysed) == ["fixable.py"]  # the others have nothing --fix would change
    analysed.clear()
    fixed = cli(["--fix", "."], root)
    assert fixed.exit_code == 1  # GOOD's CKPT001 fix is unsafe: it remains
    assert list(analysed) == ["fixable.py"]
    analysed.clear()
    again = cli(["--fix", "."], root)
    assert again.exit_code == 1
    assert list(analysed) == ["fixable.py"]  # changed by the fix: analysed once more, then cached
    analysed.clear()
    cli(["--fix", "."], root)
    assert list(analysed) == []
    # With --unsafe-fixes the unsafe fix is wanted: that file is analysed again.
    cli(["--fix", "--unsafe-fixes", "."], root)
    assert list(analysed) == ["unsafe_only.py"]


LAUNCH = "accelerate launch --config_file configs/accelerate.yaml train.py --gradient_checkpointing True\n"
FULL_SHARD = "distributed_type: FSDP\nfsdp_config:\n  fsdp_sharding_strategy: FULL_SHARD\n"
SHARD_GRAD_OP = "distributed_type: FSDP\nfsdp_config:\n  fsdp_sharding_strategy: SHARD_GRAD_OP\n"
# transformers < 5.0 runs Hugging Face checkpointing reentrant by default, which is what
# re-gathers FSDP1's parameters in backward (CKPT004); from 5.0 it is non-reentrant.
PYPROJECT_TF4 = "[project]\nname = 'demo'\ndependencies = ['transformers==4.46.3']\n"


def test_recipes_and_launch_scripts_are_cached_with_the_files_they_read(cli, make_project, record_calls):
    root = make_project(
        {"launch.sh": LAUNCH, "configs/accelerate.yaml": FULL_SHARD, "train.py": "print('train')\n"},
        pyproject=PYPROJECT_TF4,
    )
    linted = record_calls(ckptlint.runner, "lint_text", lambda text, path, *args, **kwargs: Path(path).name)
    _, cold = run_json(cli, root, ".")
    assert [item[:4] for item in cold] == [("launch.sh", 1, 66, "CKPT004")]
    assert sorted(linted) == ["accelerate.yaml", "launch.sh", "train.py"]
    linted.clear()
    _, warm = run_json(cli, root, ".")
    assert (warm, list(linted)) == (cold, [])  # not even read
    # The config the script names changed: the script's finding changes with it (parameters
    # no longer resharded after forward: only the reentrant implementation is left to say).
    (root / "configs" / "accelerate.yaml").write_text(SHARD_GRAD_OP)
    _, found = run_json(cli, root, ".")
    assert [item[:4] for item in found] == [("launch.sh", 1, 66, "CKPT002")]
    assert sorted(linted) == ["accelerate.yaml", "launch.sh"]
    # A file appears where the script looked first (next to the script, before the
    # project root... here both are the root): a new config is read.
    linted.clear()
    (root / "configs" / "accelerate.yaml").write_text(FULL_SHARD)
    _, found = run_json(cli, root, ".")
    assert [item[:4] for item in found] == [("launch.sh", 1, 66, "CKPT004")]


def test_a_script_result_depends_on_a_file_that_was_missing(cli, make_project, record_calls):
    root = make_project({"scripts/launch.sh": LAUNCH, "train.py": "print('train')\n"}, pyproject=PYPROJECT_TF4)
    linted = record_calls(ckptlint.runner, "lint_text", lambda text, path, *args, **kwargs: Path(path).name)
    assert run_json(cli, root, ".")[1] == []  # the config it names does not exist (yet)
    linted.clear()
    assert run_json(cli, root, ".")[1] == [] and list(linted) == []
    (root / "configs").mkdir()
    (root / "configs" / "accelerate.yaml").write_text(FULL_SHARD)
    _, found = run_json(cli, root, ".")
    assert [item[:4] for item in found] == [("scripts/launch.sh", 1, 66, "CKPT004")]


def test_a_run_that_finds_no_file_says_so(cli, make_project):
    root = make_project({"notes.txt": "nothing to lint\n"}, pyproject=PYPROJECT)
    result = cli(["."], root)
    assert result.exit_code == 0
    assert result.stderr == "warning: no files to lint under . (`include`: " + ", ".join(
        ["*.py", "*.pyi", "*.ipynb", "*.yaml", "*.yml", "*.json", "*.sh", "*.bash", "*.slurm", "*.sbatch"]
    ) + ")\n"
