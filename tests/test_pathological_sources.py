"""Fuzzing the limits: generated pathological sources (long chains of every operator kind,
deep nesting of every bracket and statement kind, huge literals, many definitions, and
random mixtures of them), each ending in a checkpoint call. Every file must end within the
limits with a diagnostic (the call's CKPT001, or CKPT900 saying why the file was not
analysed), in one run, with no traceback or internal error."""

from __future__ import annotations

import json
import os
import random
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

pytestmark = pytest.mark.skipif(not hasattr(os, "fork"), reason="the limits need forked workers")

IMPORT = "from torch.utils.checkpoint import checkpoint\n"
CALL = "y = checkpoint(block, x)\n"
BINARY = ["+", "-", "*", "/", "//", "%", "**", "<<", ">>", "&", "|", "^", "@"]
COMPARE = ["<", "==", "is not", "in", "not in", ">="]


def chains(n: int) -> Iterator[tuple[str, str]]:
    for index, operator in enumerate(BINARY):
        yield f"binary{index}", "y = " + f" {operator} ".join(["a"] * n) + "\n"
    for operator in ("and", "or"):
        yield f"boolean_{operator}", "y = " + f" {operator} ".join(["a"] * n) + "\n"
    for index, operator in enumerate(COMPARE):
        yield f"compare{index}", "y = " + f" {operator} ".join(["a"] * n) + "\n"
    yield "attribute", "y = a" + ".b" * n + "\n"
    yield "call", "y = f" + "(a)" * n + "\n"
    yield "subscript", "y = a" + "[0]" * n + "\n"
    yield "method_calls", "y = a" + ".m(1)" * n + "\n"
    yield "unary_not", "y = " + "not " * n + "a\n"
    yield "unary_minus", "y = " + "-" * n + "a\n"
    yield "unary_invert", "y = " + "~" * n + "a\n"
    yield "string_concatenation", "y = " + " ".join(['"s"'] * n) + "\n"
    yield "conditional", "y = " + " if c else ".join(["a"] * n) + "\n"
    yield "lambda", "y = " + "lambda: " * n + "a\n"
    yield "tuple_unpacking", ", ".join(f"v{i}" for i in range(n)) + " = " + ", ".join(["a"] * n) + "\n"


def nesting(n: int) -> Iterator[tuple[str, str]]:
    for name, (opening, closing) in {"parens": "()", "lists": "[]", "sets": "{}"}.items():
        yield f"nested_{name}", "y = " + opening * n + "a" + closing * n + "\n"
    yield "nested_calls", "y = " + "f(" * n + "a" + ")" * n + "\n"
    for keyword in ("if a:", "for a in b:", "while a:", "with a:", "def f():", "class C:", "async def g():"):
        lines = ["    " * depth + keyword for depth in range(n)] + ["    " * n + "pass"]
        yield "nested_" + keyword.split()[0].rstrip(":"), "\n".join(lines) + "\n"
    lines = ["    " * depth + "try:" for depth in range(n)] + ["    " * n + "pass"]
    for depth in reversed(range(n)):
        lines += ["    " * depth + "finally:", "    " * depth + "    pass"]
    yield "nested_try", "\n".join(lines) + "\n"
    yield "nested_fstring", "y = " + "f'{" * min(n, 150) + "a" + "}'" * min(n, 150) + "\n"


def literals(n: int) -> Iterator[tuple[str, str]]:
    yield "huge_string", "y = '" + "a" * (n * 400) + "'\n"
    yield "huge_bytes", "y = b'" + "\\x00" * (n * 100) + "'\n"
    yield "huge_list", "y = [" + ", ".join(map(str, range(n * 40))) + "]\n"
    yield "huge_dict", "y = {" + ", ".join(f"{i}: {i}" for i in range(n * 20)) + "}\n"
    yield "long_line", "y = (" + ", ".join(f"f({i})" for i in range(n * 10)) + ")\n"
    yield "many_lines", "y = [\n" + "    1,\n" * (n * 40) + "]\n"


def definitions(n: int) -> Iterator[tuple[str, str]]:
    yield "functions", "".join(f"def f{i}(a, b=1, *c, d, **e):\n    return checkpoint(g, a)\n" for i in range(n * 2))
    yield "classes", "".join(
        f"class C{i}(nn.Module):\n    def forward(self, x):\n        return checkpoint(self.l, x)\n" for i in range(n * 2)
    )
    yield "decorators", "@d\n" * (n * 4) + "def f():\n    pass\n"
    yield "rebindings", "x = checkpoint(layer, x)\n" * (n * 2)
    yield "imports", "".join(f"import m{i}.n{i} as k{i}\n" for i in range(n * 4))


FAMILIES = (chains, nesting, literals, definitions)


def mixture(seed: int) -> str:
    """A random composition: an expression built from randomly chosen shapes, nested."""
    generator = random.Random(seed)
    expression = "a"
    for _ in range(generator.randrange(50, 400)):
        shape = generator.randrange(6)
        if shape == 0:
            expression = f"{expression} {generator.choice(BINARY)} b"
        elif shape == 1:
            expression = f"{expression}.{generator.choice('abc')}"
        elif shape == 2:
            expression = f"f({expression})" if generator.random() < 0.2 else f"{expression}(x)"
        elif shape == 3:
            expression = f"{expression}[{generator.randrange(9)}]"
        elif shape == 4:
            expression = f"({expression} {generator.choice(COMPARE)} c)" if generator.random() < 0.1 else f"-{expression}"
        else:
            expression = f"{expression} if c else d"
    return f"y = {expression}\n"


def write_sources(directory: Path) -> dict[str, int]:
    """The files, and the line of each one's checkpoint call."""
    calls = {}
    sources = [(f"{name}_{size}", body) for size in (30, 1200) for family in FAMILIES for name, body in family(size)]
    sources += [(f"mixture_{seed}", mixture(seed)) for seed in range(12)]
    for name, body in sources:
        text = IMPORT + body + CALL
        (directory / f"{name}.py").write_text(text)
        calls[f"{name}.py"] = text.count("\n")
    return calls


def test_every_pathological_file_ends_with_a_diagnostic(tmp_path: Path) -> None:
    (tmp_path / "pyproject.toml").write_text("[project]\nname = 'generated'\n")
    calls = write_sources(tmp_path)
    environment = {
        **{k: v for k, v in os.environ.items() if k not in ("FORCE_COLOR", "CLICOLOR_FORCE")},
        "CKPTLINT_FILE_TIME_LIMIT": "30",
        "CKPTLINT_FILE_MEMORY_LIMIT": "400",
    }
    done = subprocess.run(
        [sys.executable, "-m", "ckptlint", ".", "--no-cache", "--output-format", "json", "--select", "CKPT001"],
        cwd=tmp_path, capture_output=True, env=environment, timeout=1800,
    )  # fmt: skip
    assert done.stderr == b"", done.stderr.decode()[-3000:]
    assert done.returncode == 1
    found: dict[str, list[tuple[str, int]]] = {}
    for item in json.loads(done.stdout):
        found.setdefault(Path(item["filename"]).name, []).append((item["code"], item["location"]["row"]))
    for name, row in sorted(calls.items()):
        diagnostics = found.get(name, [])
        assert diagnostics, f"{name}: no diagnostic"
        if ("CKPT900", diagnostics[0][1]) in diagnostics:
            continue  # not analysed, and says why
        # Analysed: the call at the end is found (definitions hold more calls before it).
        assert ("CKPT001", row) in diagnostics and {code for code, _ in diagnostics} == {"CKPT001"}, (name, diagnostics)
