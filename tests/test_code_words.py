"""The words a file's code writes, without its comments and strings (`source.code_only`),
and the gates that read them (`Rule.words_in_code_only`): a file that names checkpointing
only in prose is never parsed with libcst, a file whose code does still is."""

from __future__ import annotations

import io
import textwrap
import tokenize
from pathlib import Path

import pytest

from ckptlint.source import code_only
from tests.conftest import json_findings

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures"


def by_tokens(text: str) -> str:
    """What `code_only` must equal: each COMMENT and STRING token, from its quote on,
    replaced by a space."""
    starts = [0]
    for line in io.StringIO(text).readlines():
        starts.append(starts[-1] + len(line))
    pieces, last = [], 0
    for token in tokenize.generate_tokens(io.StringIO(text).readline):
        if token.type not in (tokenize.COMMENT, tokenize.STRING):
            continue
        quote = 0 if token.type == tokenize.COMMENT else min(i for i in (token.string.find("'"), token.string.find('"')) if i >= 0)
        start = starts[token.start[0] - 1] + token.start[1] + quote
        pieces.extend((text[last:start], " "))
        last = starts[token.end[0] - 1] + token.end[1]
    pieces.append(text[last:])
    return "".join(pieces)


TRICKY = [
    'x = "a # not a comment"  # a "quoted" comment\n',
    "s = '''one ' two '' three \\' four''' + \"\"\"a \" b \"\" c\"\"\"\n",
    'r = r"\\"" + b"\\x00" + rb\'\\\'\' + f"{x!r:>{width}}" + Rb"raw"\n',
    's = "line \\\n continued"  # and a comment\n',
    '"""Module docstring naming torch.utils.checkpoint."""\nimport os  # checkpoint(\n',
    "y = ('implicit' 'concatenation'  # between\n     \"parts\")\n",
    "if'x'in y: pass\n",
    "z = '#' + \"'\" + '\"'  # ' \"\n",
    "\n".join(["def f():", '    """', "    checkpoint(x)  # in a docstring", '    """', "    return 1", ""]),
]


@pytest.mark.parametrize("text", TRICKY)
def test_code_only_blanks_what_the_tokenizer_calls_comments_and_strings(text):
    compile(text, "<test>", "exec")  # valid Python, as the engine asks only once CPython parsed it
    assert code_only(text) == by_tokens(text)


@pytest.mark.parametrize("path", sorted(FIXTURES.rglob("*.py")), ids=lambda p: p.relative_to(FIXTURES).as_posix())
def test_code_only_matches_the_tokenizer_on_every_fixture(path):
    text = path.read_text(encoding="utf-8")
    try:
        compile(text, str(path), "exec")
    except SyntaxError:
        pytest.skip("not valid Python (a fixture of CKPT900)")
    assert code_only(text) == by_tokens(text)


PYPROJECT = "[project]\nname = 'demo'\ndependencies = ['torch>=2.4']\n"

# torch's FSDP modules explain `torch.utils.checkpoint` in docstrings and comments, and call
# `functools.partial` on functions of their own.
FSDP_PROSE = '''
"""Runtime hooks. Activation checkpointing (`torch.utils.checkpoint.checkpoint`) recomputes
the forward; see `checkpoint_wrapper(module)` for wrapping modules."""
import functools

import torch.nn as nn
from torch.distributed.fsdp import FullyShardedDataParallel as FSDP


def cast(dtype, x):
    return x.to(dtype)


def pre_forward(module: nn.Module, args):
    # For `fully_shard` + `checkpoint`, skip the pre-forward logic in the recomputation.
    to_half = functools.partial(cast, "float16")
    return FSDP(module), [to_half(a) for a in args]
'''
# A trainer that names torch's checkpoint in a comment and DeepSpeed's `load_checkpoint`.
TRAINER_PROSE = """
import deepspeed


def train(engine, path):
    # The remaining keys are forwarded to `torch.utils.checkpoint.checkpoint`.
    engine.load_checkpoint(path)
    return deepspeed.comm.get_rank()
"""
MODEL = """
import torch.nn as nn
from torch.utils.checkpoint import checkpoint


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.blocks = nn.ModuleList(nn.Linear(8, 8) for _ in range(2))

    def forward(self, x):
        for block in self.blocks:
            x = checkpoint(block, x)
        return x
"""


def test_libcst_parses_only_files_whose_code_names_checkpointing(cli, make_project, record_calls):
    import libcst

    files = {"pkg/__init__.py": "", "pkg/runtime.py": FSDP_PROSE, "pkg/trainer.py": TRAINER_PROSE, "pkg/model.py": MODEL}
    root = make_project(files, pyproject=PYPROJECT)
    parsed = record_calls(
        libcst, "parse_module", lambda text: next(p for p, t in files.items() if textwrap.dedent(t).lstrip("\n") == text)
    )
    result = cli(["--output-format", "json", "--no-cache", "."], root)
    assert json_findings(result, root) == [("pkg/model.py", 12, 17, "CKPT002")]
    assert sorted(parsed) == ["pkg/model.py"]


def test_the_same_words_in_code_still_reach_the_rules(cli, make_project):
    """The prose file with its docstring's call written as code: the wrapper's partial is
    reported (reentrant under FSDP)."""
    wrapped = FSDP_PROSE + textwrap.dedent('''
        from torch.distributed.algorithms._checkpoint.checkpoint_wrapper import CheckpointImpl, checkpoint_wrapper

        reentrant = functools.partial(checkpoint_wrapper, checkpoint_impl=CheckpointImpl.REENTRANT)
    ''')
    root = make_project({"pkg/__init__.py": "", "pkg/runtime.py": wrapped}, pyproject=PYPROJECT)
    result = cli(["--output-format", "json", "--no-cache", "."], root)
    assert [finding[3] for finding in json_findings(result, root)] == ["CKPT002"]
