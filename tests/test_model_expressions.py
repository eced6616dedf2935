"""A libcst expression read by the project model's own reader (`analysis/model_expressions.py`):
the summary form the index holds for the same text, whatever libcst node a rule holds it as."""

from __future__ import annotations

import ast

import libcst as cst
import pytest

from ckptlint.analysis.model_expressions import comprehension_clauses, read, written_name
from ckptlint.model.file_facts.ast_expressions import expression
from ckptlint.model.form.summary import LIST, UNKNOWN


def _argument(source: str) -> cst.BaseExpression:
    """The first argument of the call `source` is, as libcst holds it inside a statement."""
    call = cst.parse_module(source).body[0].body[0].value
    return call.args[0].value


@pytest.mark.parametrize("text", [
    "self.blocks[i]",
    "{'a': 1, **extra}",
    "1.5",
    "'a' 'b'",
    "x if use_reentrant else not y",
    "a or b or c",
    "(blk for blk in self.blocks if blk.enabled)",
    "[*layers, head]",
    "f(*args, key=value, **kwargs)",
    "x[1:-1]",
    "-3",
])
def test_the_reading_is_the_index_reading_of_the_same_text(text):
    held = _argument(f"run({text})\n")
    assert read(held) == expression(ast.parse(text, mode="eval").body)


def test_an_argument_over_lines_with_comments_reads_as_written():
    held = _argument("run(\n    lambda x: self.block(  # the block\n        x\n    ),\n)\n")
    assert read(held) == ("lambda", (("attr", ("name", "self"), "block"),))


def test_a_lambda_names_what_its_body_calls_once_each_in_order_and_not_what_an_inner_lambda_calls():
    held = _argument("run(lambda x: head(stem(x), stem, lambda: hidden(x)) + stem(x).mean())\n")
    stem_of_x = ("call", ("name", "stem"), (("name", "x"),), ())
    assert read(held) == ("lambda", (("name", "head"), ("name", "stem"), ("attr", stem_of_x, "mean")))


def test_a_comprehension_gives_its_clauses_outermost_first():
    held = _argument("run([blk(x) for stage in self.stages for blk in stage])\n")
    assert read(held)[3] == LIST
    assert comprehension_clauses(held) == (
        (("name", "stage"), ("attr", ("name", "self"), "stages")),
        (("name", "blk"), ("name", "stage")),
    )


@pytest.mark.parametrize("text, name", [
    ("model", "model"),
    ("self.model.config", "self.model.config"),
    ("(self.model)", "self.model"),
    ("self.layers[0].attn", None),
    ("get_model().config", None),
    ("'model'", None),
])
def test_a_written_name_is_a_name_or_attribute_chain(text, name):
    assert written_name(_argument(f"run({text})\n")) == name


def test_what_the_running_python_cannot_parse_is_unknown():
    # libcst holds the text as written; CPython's parser refuses an unknown character name.
    held = _argument('run("\\N{NO SUCH CHARACTER}")\n')
    assert isinstance(held, cst.SimpleString)
    assert read(held) == UNKNOWN
    assert read(None) == UNKNOWN
