"""Jupyter notebooks: code cells linted as one Python text, findings located by cell, fixes
written into the cells' `source` and nothing else."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from ckptlint.notebooks import CELL_BOUNDARY, ESCAPE_PLACEHOLDER, NotebookError, read_notebook

REPO_ROOT = Path(__file__).resolve().parent.parent
FIXTURE = REPO_ROOT / "fixtures" / "notebooks" / "finetune.ipynb"
TORCH = ["--target-version", "torch=2.13"]
MSG001 = (
    "`checkpoint` without `use_reentrant`: torch falls back to the reentrant implementation and its warning "
    "cannot point at this line; pass `use_reentrant=False`"
)
CALL = "    x = cp.checkpoint(block, x)  # expect: CKPT001\\n"
FIXED_CALL = "    x = cp.checkpoint(block, x, use_reentrant=False)  # expect: CKPT001\\n"


def notebook(*cells, indent: int | None = 1, **top) -> str:
    """A notebook's JSON; a cell is a code cell's source (str) or a full cell (dict)."""
    full = [
        c if isinstance(c, dict) else {"cell_type": "code", "execution_count": None, "metadata": {}, "outputs": [], "source": c.splitlines(True)}
        for c in cells
    ]
    document = {"cells": full, "metadata": {}, "nbformat": 4, "nbformat_minor": 5, **top}
    return json.dumps(document, indent=indent) + "\n"


@pytest.fixture
def fixture_copy(make_project) -> Path:
    root = make_project({})
    shutil.copy(FIXTURE, root / "finetune.ipynb")
    return root


# --- the fixture: magics, outputs, markdown, a finding in the third cell ------------------


def test_json_names_the_cell_and_the_row_inside_it(cli, fixture_copy):
    result = cli(["finetune.ipynb", "--output-format", "json", "--no-cache", *TORCH], cwd=fixture_copy)
    assert result.exit_code == 1
    [item] = json.loads(result.stdout)
    assert (item["code"], item["cell"], item["location"], item["end_location"], item["noqa_row"]) == (
        "CKPT001", 3, {"row": 5, "column": 9}, {"row": 5, "column": 32}, 5,
    )
    assert item["fix"]["edits"] == [
        {"content": ", use_reentrant=False", "location": {"row": 5, "column": 31}, "end_location": {"row": 5, "column": 31}}
    ]
    assert item["filename"] == str(fixture_copy / "finetune.ipynb")


def test_text_output_names_the_cell(cli, fixture_copy):
    result = cli(["finetune.ipynb", "--no-cache", *TORCH], cwd=fixture_copy)
    assert result.stdout.splitlines()[0] == f"finetune.ipynb:cell 3:5:9: CKPT001 warning: {MSG001}"


def test_unsafe_fix_edits_only_that_cells_source(cli, fixture_copy):
    path = fixture_copy / "finetune.ipynb"
    before = path.read_bytes()
    result = cli(["finetune.ipynb", "--fix", "--unsafe-fixes", *TORCH], cwd=fixture_copy)
    assert (result.exit_code, result.stdout) == (0, "Found 1 error (1 fixed, 0 remaining).\n")
    after = path.read_bytes()
    # Byte for byte: the one line of cell 3's source, nothing else (outputs, counts, layout).
    assert before.count(CALL.encode()) == 1
    assert after == before.replace(CALL.encode(), FIXED_CALL.encode())
    old, new = json.loads(before), json.loads(after)
    assert [c for i, c in enumerate(old["cells"]) if i != 2] == [c for i, c in enumerate(new["cells"]) if i != 2]
    assert {k: v for k, v in old["cells"][2].items() if k != "source"} == {k: v for k, v in new["cells"][2].items() if k != "source"}
    again = cli(["finetune.ipynb", "--fix", "--unsafe-fixes", *TORCH], cwd=fixture_copy)
    assert (again.exit_code, again.stdout, path.read_bytes()) == (0, "All checks passed!\n", after)


def test_diff_shows_the_cells_code(cli, fixture_copy):
    result = cli(["finetune.ipynb", "--diff", "--unsafe-fixes", "--no-cache", *TORCH], cwd=fixture_copy)
    assert result.exit_code == 1
    assert result.stdout == (
        "--- a/finetune.ipynb:cell 3\n"
        "+++ b/finetune.ipynb:cell 3\n"
        "@@ -2,7 +2,7 @@\n"
        " blocks = nn.ModuleList(nn.Sequential(nn.Linear(64, 64), nn.GELU()) for _ in range(4))\n"
        " x = torch.randn(8, 64, requires_grad=True)\n"
        " for block in blocks:\n"
        "-    x = cp.checkpoint(block, x)  # expect: CKPT001\n"
        "+    x = cp.checkpoint(block, x, use_reentrant=False)  # expect: CKPT001\n"
        "     %time _ = x.sum()\n"
        " loss = x.mean()\n"
        " loss.backward()\n"
    )
    assert (fixture_copy / "finetune.ipynb").read_bytes() == FIXTURE.read_bytes()


def test_sarif_and_github_name_the_cell(cli, fixture_copy):
    sarif = cli(["finetune.ipynb", "--output-format", "sarif", "--no-cache", *TORCH], cwd=fixture_copy)
    [result] = json.loads(sarif.stdout)["runs"][0]["results"]
    [location] = result["locations"]
    assert location["physicalLocation"]["artifactLocation"] == {"uri": "finetune.ipynb"}
    assert location["physicalLocation"]["region"] == {"startLine": 5, "startColumn": 9, "endLine": 5, "endColumn": 32}
    assert location["logicalLocations"] == [{"name": "cell 3", "fullyQualifiedName": "finetune.ipynb:cell 3", "kind": "module"}]
    assert result["properties"] == {"cell": 3}
    github = cli(["finetune.ipynb", "--output-format", "github", "--no-cache", *TORCH], cwd=fixture_copy)
    assert github.stdout == (
        f"::warning title=ckptlint (CKPT001) in cell 3,file=finetune.ipynb::cell 3, line 5, column 9: CKPT001 {MSG001}\n"
    )


def test_junit_and_standard_input(cli, fixture_copy):
    junit = cli(["finetune.ipynb", "--output-format", "junit", "--no-cache", *TORCH], cwd=fixture_copy)
    assert f"<failure message=\"CKPT001 {MSG001}\" type=\"warning\">cell 3, line 5, col 9, CKPT001 {MSG001}</failure>" in junit.stdout
    data = FIXTURE.read_bytes()
    piped = cli(["-", "--stdin-filename", "finetune.ipynb", *TORCH], cwd=fixture_copy, input=data)
    assert piped.stdout.splitlines()[0] == f"finetune.ipynb:cell 3:5:9: CKPT001 warning: {MSG001}"
    fixed = cli(["-", "--stdin-filename", "finetune.ipynb", "--fix", "--unsafe-fixes", *TORCH], cwd=fixture_copy, input=data)
    assert fixed.stdout_bytes == data.replace(CALL.encode(), FIXED_CALL.encode())


def test_the_cache_keeps_cells(cli, fixture_copy):
    cold = cli(["finetune.ipynb", "--output-format", "json", *TORCH], cwd=fixture_copy)
    stored = [
        entry
        for file in (fixture_copy / ".ckptlint_cache").rglob("*.json")
        for entry in json.loads(file.read_text()).get("files", {}).values()
        if isinstance(entry, dict) and "diagnostics" in entry
    ]
    assert [d["cell"] for entry in stored for d in entry["diagnostics"]] == [3]
    warm = cli(["finetune.ipynb", "--output-format", "json", *TORCH], cwd=fixture_copy)
    assert warm.stdout == cold.stdout


# --- what a cell holds ------------------------------------------------------------------------


def test_escapes_keep_every_other_row_and_column():
    source = (
        "import torch.utils.checkpoint as cp\n"
        "!nvidia-smi\n"
        "files = !ls\n"
        "cp.checkpoint?\n"
        "if True:\n"
        "    %time y = cp.checkpoint(f, x)\n"
        "total = (a\n"
        "         % b)\n"
        'doc = """\n'
        "%not a magic\n"
        '"""\n'
        "z = cp.checkpoint(f, x)"
    )
    parsed = read_notebook(notebook(source))
    lines = parsed.python_text.splitlines()
    assert lines[1:6] == ["pass  # ckptlint: IPython escape"] * 3 + ["if True:", "    " + ESCAPE_PLACEHOLDER]
    assert lines[6:11] == ["total = (a", "         % b)", 'doc = """', "%not a magic", '"""']
    assert lines[11:] == ["z = cp.checkpoint(f, x)", CELL_BOUNDARY]
    assert parsed.cells[0].escapes == ("!nvidia-smi\n", "files = !ls\n", "cp.checkpoint?\n", "    %time y = cp.checkpoint(f, x)\n")


def test_a_shell_escape_continued_with_backslashes_is_one_escape(cli, make_project):
    """`!curl URL \\` and its indented continuation lines are one shell command (IPython
    joins them), not Python with an unexpected indent; fixes keep them as written."""
    source = (
        "import torch.utils.checkpoint as cp\n"
        "!curl http://localhost:8000/v1/completions \\\n"
        '  -H "Content-Type: application/json" \\\n'
        "  -d '{\"prompt\": 1}'\n"
        "y = cp.checkpoint(f, x)\n"
    )
    parsed = read_notebook(notebook(source))
    assert parsed.python_text.splitlines()[1:5] == [ESCAPE_PLACEHOLDER] * 3 + ["y = cp.checkpoint(f, x)"]
    root = make_project({"nb.ipynb": notebook(source)})
    result = cli(["nb.ipynb", "--output-format", "json", "--no-cache", *TORCH], cwd=root)
    found = [(d["cell"], d["location"]["row"], d["code"]) for d in json.loads(result.stdout)]
    assert found == [(1, 5, "CKPT001")]
    cli(["nb.ipynb", "--fix", "--unsafe-fixes", "--no-cache", *TORCH], cwd=root)
    fixed = "".join(json.loads((root / "nb.ipynb").read_text())["cells"][0]["source"])
    assert fixed == source.replace("cp.checkpoint(f, x)", "cp.checkpoint(f, x, use_reentrant=False)")


def test_automagic_lines_are_escapes_and_python_that_looks_alike_is_not():
    """IPython runs `pip install peft` as `%pip` (automagic, on by default); `pip = 3`,
    `cd(x)`, `ls + 1` are Python (IPython's own checkers leave them alone)."""
    source = "pip install peft\ncd ..\nls -la\npip = 3\ncd(pip)\nls + 1\n"
    parsed = read_notebook(notebook(source))
    assert parsed.python_text.splitlines()[:6] == [ESCAPE_PLACEHOLDER] * 3 + ["pip = 3", "cd(pip)", "ls + 1"]


def test_an_empty_notebook_file_has_no_cells(cli, make_project):
    """A zero-byte `.ipynb` (an editor's new file; Jupyter cannot open it either) is a
    notebook without cells, not a parse error."""
    root = make_project({"empty.ipynb": "", "blank.ipynb": "\n"})
    result = cli(["empty.ipynb", "blank.ipynb", "--no-cache", *TORCH], cwd=root)
    assert result.exit_code == 0, result.stdout
    assert read_notebook("").cells == ()


def test_findings_across_cells_and_magics(cli, make_project):
    root = make_project(
        {
            "nb.ipynb": notebook(
                {"cell_type": "markdown", "metadata": {}, "source": ["# Title"]},
                "%load_ext autoreload\nimport torch.utils.checkpoint as cp",
                "%%bash\npython -c 'cp.checkpoint(f, x)'",
                "%%time\ny = cp.checkpoint(f, x)\nz = cp.checkpoint(g, y)  # noqa: CKPT001",
                "for i in range(2):\n    !echo $i\n    y = cp.checkpoint(f, y)",
            )
        }
    )
    result = cli(["nb.ipynb", "--output-format", "json", "--no-cache", *TORCH], cwd=root)
    found = [(d["cell"], d["location"]["row"], d["location"]["column"], d["code"]) for d in json.loads(result.stdout)]
    assert found == [(4, 2, 5, "CKPT001"), (5, 3, 9, "CKPT001")]


def test_a_noqa_naming_no_rule_is_located_in_its_cell(cli, make_project):
    root = make_project({"nb.ipynb": notebook("import torch", "x = 1\ny = 2  # noqa: CKPT999")})
    result = cli(["nb.ipynb", "--no-cache"], cwd=root)
    assert result.exit_code == 0
    assert "warning: nb.ipynb:cell 2:2: `# noqa: CKPT999` names no ckptlint rule; known codes: CKPT001," in result.stderr


def test_a_notebook_in_another_language_is_not_linted(cli, make_project):
    root = make_project(
        {"r.ipynb": notebook("checkpoint(f, x)", metadata={"kernelspec": {"language": "R", "name": "ir"}})}
    )
    result = cli(["r.ipynb", "--no-cache"], cwd=root)
    assert (result.exit_code, result.stdout) == (0, "All checks passed!\n")


def test_fixes_keep_the_files_own_layout(cli, make_project):
    """Two-space indentation, unsorted keys, a string `source`, non-ASCII text, no final
    newline: all kept; only the changed cell's value is written."""
    cells = [
        {"source": "# café\nimport torch.utils.checkpoint as cp\n", "cell_type": "code", "outputs": [], "metadata": {}, "execution_count": 3},
        {"source": "y = cp.checkpoint(f, x)", "cell_type": "code", "outputs": [], "metadata": {}, "execution_count": 4},
    ]
    text = json.dumps({"nbformat_minor": 5, "nbformat": 4, "metadata": {}, "cells": cells}, indent=2, ensure_ascii=False)
    root = make_project({"nb.ipynb": text.encode()})
    result = cli(["nb.ipynb", "--fix", "--unsafe-fixes", *TORCH], cwd=root)
    assert result.exit_code == 0, result.output
    assert (root / "nb.ipynb").read_text(encoding="utf-8") == text.replace(
        '"y = cp.checkpoint(f, x)"', '"y = cp.checkpoint(f, x, use_reentrant=False)"'
    )


def test_a_safe_fix_that_adds_a_line_stays_in_its_cell(cli, make_project):
    root = make_project(
        {
            "nb.ipynb": notebook(
                "from transformers import AutoModelForCausalLM",
                "model = AutoModelForCausalLM.from_pretrained('gpt2')\nmodel.gradient_checkpointing_enable()",
                "for batch in loader:\n    model(**batch).loss.backward()",
            )
        }
    )
    result = cli(["nb.ipynb", "--fix", "--target-version", "transformers=4.46", *TORCH], cwd=root)
    assert result.exit_code == 0, result.output
    cells = json.loads((root / "nb.ipynb").read_text())["cells"]
    assert [c["source"] for c in cells] == [
        ["from transformers import AutoModelForCausalLM"],
        [
            "model = AutoModelForCausalLM.from_pretrained('gpt2')\n",
            "model.gradient_checkpointing_enable()\n",
            "model.config.use_cache = False",
        ],
        ["for batch in loader:\n", "    model(**batch).loss.backward()"],
    ]


# --- notebooks that cannot be read ----------------------------------------------------------


@pytest.mark.parametrize(
    ("content", "expected"),
    [
        ('{"cells": [\n  {"cell_type": "code",}\n]}\n', (2, 24, "invalid notebook JSON: Expecting property name enclosed in double quotes")),
        (
            json.dumps({"worksheets": [], "nbformat": 3}),
            (1, 1, "not an nbformat 4 notebook (nbformat 3); convert it with `jupyter nbconvert --to notebook`"),
        ),
        ('{"metadata": {}}', (1, 1, "not an nbformat 4 notebook (no `cells` list); convert it with `jupyter nbconvert --to notebook`")),
        ('{"cells": [\n {"cell_type": "markdown", "source": ""},\n {"cell_type": "code"}\n], "nbformat": 4}', (3, 2, "cell 2 has no `source`")),
        ('{"cells": [{"cell_type": "code", "source": 7}], "nbformat": 4}', (1, 44, "cell 1: `source` is neither a string nor a list of strings")),
        ("[1, 2]", (1, 1, "not a Jupyter notebook: the file's JSON is not an object")),
    ],
    ids=["invalid-json", "nbformat-3", "no-cells", "no-source", "bad-source", "not-an-object"],
)
def test_a_bad_notebook_is_a_parse_error_and_the_run_goes_on(cli, make_project, content, expected):
    root = make_project({"bad.ipynb": content, "good.py": "import torch.utils.checkpoint as cp\ncp.checkpoint(f, x)\n"})
    for fix in ([], ["--fix", "--unsafe-fixes"]):
        result = cli([".", "--output-format", "json", "--no-cache", *fix, *TORCH], cwd=root)
        assert "Traceback" not in result.output
        items = json.loads(result.stdout)
        found = [(Path(d["filename"]).name, d["code"], d["cell"], d["location"]["row"], d["location"]["column"], d["message"]) for d in items]
        row, column, message = expected
        assert found[0] == ("bad.ipynb", "CKPT900", None, row, column, message)
        assert [f[:2] for f in found[1:]] == ([] if fix else [("good.py", "CKPT001")])
        assert result.exit_code == 1
    assert (root / "bad.ipynb").read_text() == content


def test_a_cell_that_is_not_python_is_reported_and_the_others_are_linted(cli, make_project):
    """Jupyter runs each cell alone: a broken snippet (as documentation notebooks hold) is
    CKPT900 in its cell, and does not hide the findings of the others or stop their fixes."""
    content = notebook(
        "import torch.utils.checkpoint as cp",
        "x = 1\ny = (2 +",
        "z = cp.checkpoint(f, x)",
        "result = await client.fetch()",  # IPython runs a top-level await: not an error
    )
    root = make_project({"nb.ipynb": content})
    result = cli(["nb.ipynb", "--output-format", "json", "--no-cache", *TORCH], cwd=root)
    found = [(d["code"], d["cell"], d["location"]["row"], d["location"]["column"], d["message"]) for d in json.loads(result.stdout)]
    assert found == [("CKPT900", 2, 2, 5, "SyntaxError: '(' was never closed"), ("CKPT001", 3, 1, 5, MSG001)]
    fixed = cli(["nb.ipynb", "--fix", "--unsafe-fixes", "--output-format", "json", *TORCH], cwd=root)
    assert [(d["code"], d["cell"]) for d in json.loads(fixed.stdout)] == [("CKPT900", 2)]
    assert (root / "nb.ipynb").read_text() == content.replace(
        '"z = cp.checkpoint(f, x)"', '"z = cp.checkpoint(f, x, use_reentrant=False)"'
    )


def test_fixed_code_that_no_longer_splits_into_cells_is_refused():
    parsed = read_notebook(notebook("x = 1", "y = 2"))
    with pytest.raises(NotebookError, match="no longer separates"):
        parsed.with_python_text(parsed.python_text.replace(CELL_BOUNDARY + "\n", "", 1))


# --- the project index reads notebooks ------------------------------------------------------------

BLOCKS = """
import torch.nn as nn


class ConvBlock(nn.Module):
    def __init__(self):
        super().__init__()
        self.bn = nn.BatchNorm2d(3)

    def forward(self, x):
        return self.bn(x)
"""

LAYERS = """
from torch.utils.checkpoint import checkpoint


def run(layer, x):
    return checkpoint(layer, x)
"""


def test_cross_file_facts_include_notebooks(cli, make_project):
    root = make_project(
        {
            "pkg/__init__.py": "",
            "pkg/blocks.py": BLOCKS,
            "pkg/layers.py": LAYERS,
            # A module's model checkpointed in a notebook, and FSDP used only in a notebook.
            "notebooks/bn.ipynb": notebook(
                "from torch.utils.checkpoint import checkpoint\nfrom pkg.blocks import ConvBlock",
                "y = checkpoint(ConvBlock(), x, use_reentrant=False)",
            ),
            "notebooks/shard.ipynb": notebook(
                "from torch.distributed.fsdp import FullyShardedDataParallel as FSDP\nmodel = FSDP(model)"
            ),
        }
    )
    result = cli([".", "--output-format", "json", "--no-cache", *TORCH], cwd=root)
    found = [(Path(d["filename"]).relative_to(root).as_posix(), d["cell"], d["location"]["row"], d["code"]) for d in json.loads(result.stdout)]
    assert found == [("notebooks/bn.ipynb", 2, 1, "CKPT010"), ("pkg/layers.py", None, 5, "CKPT002")]
    # A place in a notebook that a message names is a cell and a row in it.
    assert "(`FullyShardedDataParallel` at notebooks/shard.ipynb:cell 1:2)" in json.loads(result.stdout)[1]["message"]
    # Only the module named, as pre-commit does: the notebook still makes it an FSDP project.
    named = cli(["pkg/layers.py", "--output-format", "json", *TORCH], cwd=root)
    assert [d["code"] for d in json.loads(named.stdout)] == ["CKPT002"]
