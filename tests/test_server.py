"""`ckptlint server`: real LSP sessions over stdio with a `python -m ckptlint server`
process (tests/lsp_client.py speaks JSON-RPC with Content-Length framing), and the pure
text work behind them (positions in UTF-16 code units, minimal edits, `# noqa` merging)."""

from __future__ import annotations

import sys
import textwrap
from pathlib import Path

import pytest
from hypothesis import given, strategies as st

pytest.importorskip("pygls")

from ckptlint.config import ConfigError  # noqa: E402
from ckptlint.server.edits import DocumentPositions, edits_between, with_noqa  # noqa: E402
from ckptlint.server.options import overrides_from_options  # noqa: E402
from ckptlint.server.types import EditorPosition, PositionEncoding  # noqa: E402
from ckptlint.types import Location  # noqa: E402
from tests.lsp_client import LspClient, apply_edits  # noqa: E402

IMPLICIT_REENTRANT = """\
from torch.utils.checkpoint import checkpoint


def forward(block, x):
    return checkpoint(block, x)
"""
FIXED = IMPLICIT_REENTRANT.replace("checkpoint(block, x)", "checkpoint(block, x, use_reentrant=False)")
LATE_BINDING = """\
from torch.utils.checkpoint import checkpoint


def forward(self, x):
    for block in self.blocks:
        x = checkpoint(lambda t: block(t), x, use_reentrant=False)  # 🔥 héllo
    return x
"""
RULE_URL = "https://github.com/ckptlint/ckptlint/blob/main/docs/rules/{code}.md"


def project(root: Path, files: dict[str, str] | None = None, pyproject: str = "[project]\nname = 'demo'\n") -> Path:
    (root / "pyproject.toml").write_text(pyproject)
    for relative, content in (files or {}).items():
        (root / relative).parent.mkdir(parents=True, exist_ok=True)
        (root / relative).write_text(textwrap.dedent(content).lstrip("\n"))
    return root


@pytest.fixture
def client(tmp_path):
    clients: list[LspClient] = []

    def start(command: list[str] | None = None) -> LspClient:
        clients.append(LspClient(tmp_path, command))
        return clients[-1]

    yield start
    for started in clients:
        started.close()


def codes(diagnostics: list[dict]) -> list[str]:
    return [d["code"] for d in diagnostics]


def edited(text: str, action: dict, uri: str) -> str:
    return apply_edits(text, action["edit"]["changes"][uri])


# --- a whole session ---------------------------------------------------------------------


def test_a_session_from_initialize_to_exit(tmp_path, client):
    root = project(tmp_path)
    server = client()
    capabilities = server.initialize(root)["result"]["capabilities"]
    assert capabilities["codeActionProvider"]["codeActionKinds"] == ["quickfix", "source.fixAll.ckptlint"]

    # An unsaved buffer: train.py does not exist on disk.
    uri = server.open(root / "train.py", IMPLICIT_REENTRANT)
    [diagnostic] = server.diagnostics(uri, version=1)
    assert diagnostic["code"] == "CKPT001"
    assert diagnostic["range"] == {"start": {"line": 4, "character": 11}, "end": {"line": 4, "character": 31}}
    assert diagnostic["codeDescription"]["href"] == RULE_URL.format(code="CKPT001")
    assert diagnostic["source"] == "ckptlint"
    assert diagnostic["severity"] == 2  # warning

    response = server.code_actions(uri, diagnostic["range"]["start"], diagnostic["range"]["start"], [diagnostic])
    actions = {action["title"]: action for action in response["result"]}
    fix = actions["CKPT001: Add `use_reentrant=False` (unsafe)"]
    assert fix["kind"] == "quickfix" and not fix.get("isPreferred")
    assert fix["diagnostics"][0]["code"] == "CKPT001"
    # The edit inserts the keyword; it does not replace the document.
    assert fix["edit"]["changes"][uri] == [
        {"range": {"start": {"line": 4, "character": 30}, "end": {"line": 4, "character": 30}}, "newText": ", use_reentrant=False"}
    ]
    assert edited(IMPLICIT_REENTRANT, fix, uri) == FIXED
    noqa = actions["Suppress CKPT001 with `# noqa: CKPT001`"]
    assert edited(IMPLICIT_REENTRANT, noqa, uri).splitlines()[4] == "    return checkpoint(block, x)  # noqa: CKPT001"
    # CKPT001's fix is unsafe: there is nothing for "fix all safe findings" to do.
    assert not any(action["kind"] == "source.fixAll.ckptlint" for action in response["result"])

    server.change(uri, FIXED, version=2)
    assert server.diagnostics(uri, version=2) == []

    assert server.stop() == 0


def test_diagnostics_follow_the_latest_change_and_save(tmp_path, client):
    root = project(tmp_path)
    server = client()
    server.initialize(root)
    uri = server.open(root / "train.py", FIXED)
    assert server.diagnostics(uri, version=1) == []
    # Two changes in a row: the second supersedes the lint the first scheduled.
    server.change(uri, IMPLICIT_REENTRANT.replace("(block, x)", "(block, y)"), version=2)
    server.change(uri, IMPLICIT_REENTRANT, version=3)
    [diagnostic] = server.diagnostics(uri, version=3)
    assert diagnostic["range"]["end"]["character"] == 31
    (root / "train.py").write_text(FIXED)
    server.change(uri, FIXED, version=4)
    server.notify("textDocument/didSave", {"textDocument": {"uri": uri}})
    assert server.diagnostics(uri, version=4) == []
    server.notify("textDocument/didClose", {"textDocument": {"uri": uri}})
    closed = server.wait_for(
        lambda m: m.get("method") == "textDocument/publishDiagnostics" and "version" not in m["params"], "the clearing on close"
    )
    assert closed["params"] == {"uri": uri, "diagnostics": []}
    assert server.stop() == 0


def test_fix_all_and_positions_on_a_line_with_non_ascii_text(tmp_path, client):
    root = project(tmp_path)
    server = client()
    server.initialize(root)
    text = LATE_BINDING.replace("        x = checkpoint", "        y = '🔥'; x = checkpoint")
    uri = server.open(root / "model.py", text)
    [diagnostic] = server.diagnostics(uri)
    assert diagnostic["code"] == "CKPT030"
    line = text.splitlines()[5]
    # UTF-16: the emoji before the call counts two code units.
    column = line.index("checkpoint(")
    assert diagnostic["range"]["start"] == {"line": 5, "character": column + 1}

    response = server.code_actions(uri, {"line": 0, "character": 0}, {"line": 0, "character": 0}, [], only=["source.fixAll"])
    [fix_all] = response["result"]
    assert fix_all["kind"] == "source.fixAll.ckptlint"
    assert fix_all["title"] == "Fix all safe ckptlint findings in this file"
    assert edited(text, fix_all, uri) == text.replace("lambda t: block(t)", "lambda t, block=block: block(t)")

    response = server.code_actions(uri, diagnostic["range"]["start"], diagnostic["range"]["end"], [diagnostic], only=["quickfix"])
    [fix, noqa] = response["result"]
    assert fix["isPreferred"] is True and "(unsafe)" not in fix["title"]
    assert edited(text, fix, uri) == edited(text, fix_all, uri)
    # The line has a comment already: the suppression follows it.
    assert edited(text, noqa, uri).splitlines()[5].endswith("# 🔥 héllo  # noqa: CKPT030")
    assert server.stop() == 0


def test_a_client_that_counts_utf8_bytes_gets_byte_columns(tmp_path, client):
    root = project(tmp_path)
    server = client()
    result = server.initialize(root, encodings=("utf-8",))["result"]
    assert result["capabilities"]["positionEncoding"] == "utf-8"
    uri = server.open(root / "a.py", IMPLICIT_REENTRANT.replace("    return", "    y = 'é🔥'; return"))
    [diagnostic] = server.diagnostics(uri)
    # `    y = 'é🔥'; return ` is 21 characters, 25 bytes in UTF-8 (é 2, 🔥 4).
    assert diagnostic["range"]["start"] == {"line": 4, "character": 25}
    assert server.stop() == 0


MODEL = """
import torch.nn as nn
from torch.utils.checkpoint import checkpoint


class Model(nn.Module):
    def forward(self, x):
        for block in self.blocks:
            x = checkpoint(block, x)
        return x
"""
TRAIN_FSDP = """
from torch.distributed.fsdp import FullyShardedDataParallel as FSDP

from pkg.model import Model


def main():
    return FSDP(Model())
"""
TRAIN_PLAIN = """
from pkg.model import Model


def main():
    return Model()
"""


def test_another_file_changing_on_disk_lints_the_open_buffers_again(tmp_path, client):
    root = project(tmp_path, {"pkg/__init__.py": "", "pkg/model.py": MODEL, "train.py": TRAIN_PLAIN})
    server = client()
    server.initialize(root)
    model = server.open(root / "pkg/model.py", (root / "pkg/model.py").read_text())
    assert codes(server.diagnostics(model)) == ["CKPT001"]

    # FSDP appears in another file (written by another tool): the watched-files event.
    (root / "train.py").write_text(textwrap.dedent(TRAIN_FSDP).lstrip("\n"))
    server.notify("workspace/didChangeWatchedFiles", {"changes": [{"uri": (root / "train.py").as_uri(), "type": 2}]})
    assert codes(server.diagnostics(model, lambda d: codes(d) != ["CKPT001"])) == ["CKPT002"]

    # Edited and saved in the editor: the save of the other document.
    train = server.open(root / "train.py", (root / "train.py").read_text())
    plain = textwrap.dedent(TRAIN_PLAIN).lstrip("\n")
    server.change(train, plain, version=2)
    (root / "train.py").write_text(plain)
    server.notify("textDocument/didSave", {"textDocument": {"uri": train}})
    assert codes(server.diagnostics(model, lambda d: codes(d) != ["CKPT002"])) == ["CKPT001"]
    assert server.stop() == 0


# --- configuration -------------------------------------------------------------------------


def test_initialization_options_select_rules_and_config_files_apply(tmp_path, client):
    root = project(tmp_path, pyproject="[project]\nname = 'demo'\n\n[tool.ckptlint]\nignore = ['CKPT030']\n")
    server = client()
    server.initialize(root, {"ignore": ["CKPT001"], "targetVersions": {"torch": "2.4"}})
    uri = server.open(root / "a.py", IMPLICIT_REENTRANT + LATE_BINDING.split("\n\n\n", 1)[1])
    assert server.diagnostics(uri) == []  # CKPT001 by the options, CKPT030 by the config file
    assert server.stop() == 0


def test_bad_options_and_config_files_are_shown_not_fatal(tmp_path, client):
    root = project(tmp_path, {"sub/pyproject.toml": "[tool.ckptlint]\nselect = ['NOPE']\n"})
    server = client()
    server.initialize(root, {"select": ["CKPT999"]})
    shown = server.wait_for(lambda m: m.get("method") == "window/showMessage", "the options error")["params"]
    assert shown["type"] == 1 and "initializationOptions: `select`" in shown["message"] and "CKPT999" in shown["message"]
    uri = server.open(root / "a.py", IMPLICIT_REENTRANT)
    assert codes(server.diagnostics(uri)) == ["CKPT001"]  # linted without the bad options

    broken = server.open(root / "sub" / "b.py", IMPLICIT_REENTRANT)
    shown = server.wait_for(lambda m: m.get("method") == "window/showMessage", "the config error")["params"]
    assert "pyproject.toml" in shown["message"] and "NOPE" in shown["message"]
    assert server.diagnostics(broken) == []
    assert server.stop() == 0


def test_options_are_validated_like_the_command_line():
    overrides = overrides_from_options(
        {"select": "ckpt0", "extend_select": ["CKPT9"], "targetVersion": ["torch=2.4"], "config": "c.toml"}, Path("/w")
    )
    assert overrides.select == ("CKPT0",) and overrides.extend_select == ("CKPT9",)
    assert overrides.target_versions == ("torch=2.4",) and overrides.config_file == Path("/w/c.toml")
    for bad, named in [({"colour": 1}, "unknown key `colour`"), ({"target-versions": {"jax": "1"}}, "jax"), ([1], "object")]:
        with pytest.raises(ConfigError, match=named):
            overrides_from_options(bad, None)


# --- robustness ------------------------------------------------------------------------------

# The server with code actions made to fail for one document: a bug inside a request.
FAILING_CODE_ACTIONS = """
import runpy
import ckptlint.server.lsp as lsp

real = lsp.code_actions_for

async def failing(server, params):
    if "explode" in params.text_document.uri:
        raise RuntimeError("boom from a test")
    return await real(server, params)

lsp.code_actions_for = failing
runpy.run_module("ckptlint", run_name="__main__", alter_sys=True)
"""


def test_a_request_that_fails_is_answered_with_an_error_and_the_server_goes_on(tmp_path, client):
    root = project(tmp_path)
    server = client([sys.executable, "-c", FAILING_CODE_ACTIONS, "server"])
    server.initialize(root)
    explode = server.open(root / "explode.py", IMPLICIT_REENTRANT)
    fine = server.open(root / "fine.py", IMPLICIT_REENTRANT)
    start = {"line": 4, "character": 11}
    response = server.code_actions(explode, start, start, [])
    assert response["error"]["code"] == -32603  # InternalError
    logged = server.wait_for(
        lambda m: m.get("method") == "window/logMessage" and "boom from a test" in m["params"]["message"], "the traceback"
    )
    assert "Traceback" in logged["params"]["message"]
    assert len(server.code_actions(fine, start, start, [])["result"]) == 2
    assert codes(server.diagnostics(fine)) == ["CKPT001"]
    assert server.stop() == 0


def test_exit_without_shutdown_is_status_1(tmp_path, client):
    server = client()
    server.initialize(project(tmp_path))
    server.notify("exit")
    assert server.wait() == 1


def test_without_the_extra_the_command_says_what_to_install(cli, tmp_path, monkeypatch):
    for name in [n for n in sys.modules if n == "ckptlint.server" or n.startswith(("ckptlint.server.", "pygls"))]:
        monkeypatch.delitem(sys.modules, name)
    monkeypatch.setitem(sys.modules, "pygls", None)  # as if not installed
    result = cli(["server"], tmp_path)
    assert result.exit_code == 2
    assert "pip install 'ckptlint[server]'" in result.stderr and len(result.stderr.strip().splitlines()) == 1


# --- the text work behind the actions ----------------------------------------------------


def test_positions_count_utf16_code_units():
    text = "a = '🔥é'; f(x)\r\nnext\n"
    positions = DocumentPositions(text)
    assert positions.position(Location(1, 11)) == EditorPosition(0, 11)  # after 🔥 (2 units) and é (1)
    assert DocumentPositions(text, PositionEncoding.UTF8).position(Location(1, 11)) == EditorPosition(0, 14)
    assert positions.position(Location(1, 99)) == EditorPosition(0, 15)  # clamped before \r\n
    assert positions.position(Location(2, 1)) == EditorPosition(1, 0)
    assert positions.location(EditorPosition(0, 11)) == Location(1, 11)
    assert positions.offset(EditorPosition(5, 0)) == len(text)


def test_edits_are_the_changed_characters_only():
    old = "a = f(x)\r\nb = 2\r\nc = 3\r\n"
    new = "a = f(x, y=1)\r\nb = 2\r\nc = 4\r\nd = 5\r\n"
    changes = edits_between(old, new)
    assert [(c.start, c.end, c.new_text) for c in changes] == [
        (EditorPosition(0, 7), EditorPosition(0, 7), ", y=1"),
        (EditorPosition(2, 4), EditorPosition(2, 5), "4\r\nd = 5"),
    ]
    assert edits_between(old, old) == ()


@pytest.mark.parametrize(
    ("line", "expected"),
    [
        ("x = f(a)", "x = f(a)  # noqa: CKPT001"),
        ("x = f(a)  # noqa: E501", "x = f(a)  # noqa: E501, CKPT001"),
        ("x = f(a)  # NOQA:E501,W1 why", "x = f(a)  # NOQA:E501,W1, CKPT001 why"),
        ("x = f(a)  # type: ignore", "x = f(a)  # type: ignore  # noqa: CKPT001"),
        ("x = f('# noqa: E1')   ", "x = f('# noqa: E1')  # noqa: CKPT001"),
        ("x = f(a)  # noqa: CKPT001", "x = f(a)  # noqa: CKPT001"),
    ],
)
def test_noqa_is_added_to_the_comment_the_line_has(line, expected):
    assert with_noqa(f"import y\n{line}\r\nz = 1\n", 2, "CKPT001", python=True) == f"import y\n{expected}\r\nz = 1\n"


def test_no_noqa_where_a_comment_cannot_go():
    assert with_noqa('x = f("""a\nb""")\n', 1, "CKPT001", python=True) is None
    assert with_noqa("x = f(a, \\\n  b)\n", 1, "CKPT001", python=True) is None
    assert with_noqa("use_reentrant: true  # why\n", 1, "CKPT002", python=False) == "use_reentrant: true  # why  # noqa: CKPT002\n"


def test_an_edit_never_ends_inside_a_crlf_pair():
    """Found by the property below: `\r\n` -> `\n` shares the `\n`, but the position
    between `\r` and `\n` is no LSP position; the edit replaces the whole pair."""
    (change,) = edits_between("a\r\n", "a\n")
    assert apply_edits("a\r\n", [{"range": {"start": {"line": change.start.line, "character": change.start.character},
                                            "end": {"line": change.end.line, "character": change.end.character}},
                                  "newText": change.new_text}]) == "a\n"


_TEXTS = st.text(alphabet="ab #\r\n🔥é", max_size=40)


@given(_TEXTS, _TEXTS)
def test_edits_turn_the_old_text_into_the_new_one(old, new):
    changes = edits_between(old, new)
    as_lsp = [
        {
            "range": {
                "start": {"line": c.start.line, "character": c.start.character},
                "end": {"line": c.end.line, "character": c.end.character},
            },
            "newText": c.new_text,
        }
        for c in changes
    ]
    assert apply_edits(old, as_lsp) == new
    assert all(a.end <= b.start for a, b in zip(changes, changes[1:]))


def test_recipes_are_linted_and_suppressed_with_their_own_comments(tmp_path):
    from ckptlint.server.actions import comment_style, finding_actions
    from ckptlint.server.projects import EditorProjects

    # transformers < 5.0: reentrant by default, so FSDP1 re-gathers in backward (CKPT004).
    root = project(tmp_path, pyproject="[project]\nname = 'demo'\ndependencies = ['transformers==4.46.3']\n")
    yaml_text = "gradient_checkpointing: true  # on\nfsdp: full_shard auto_wrap\n"
    [finding] = EditorProjects().lint(yaml_text, root / "sft.yaml").diagnostics
    assert finding.code == "CKPT004"
    [noqa] = finding_actions(yaml_text, finding, comments=comment_style(root / "sft.yaml", yaml_text), encoding=PositionEncoding.UTF16)
    assert [(c.start, c.new_text) for c in noqa.changes] == [(EditorPosition(0, 34), "  # noqa: CKPT004")]
    json_text = '{"gradient_checkpointing": true, "fsdp": "full_shard auto_wrap"}\n'
    [finding] = EditorProjects().lint(json_text, root / "args.json").diagnostics
    assert finding_actions(json_text, finding, comments=comment_style(root / "args.json", json_text), encoding=PositionEncoding.UTF16) == []
