"""`ckptlint server` keeping up with the editor: files watched on disk, the client's settings,
other buffers' unsaved text, notebooks through notebook synchronisation, and buffers analysed
in worker processes under the per-file limits (a hostile one delays no other, and its
memory comes back when it closes). Real sessions over stdio (tests/lsp_client.py); the tests
wait for the messages they expect, never for a time to pass."""

from __future__ import annotations

import os
import sys
import textwrap
import time
from pathlib import Path

import pytest

pytest.importorskip("pygls")

from tests.lsp_client import SAFETY_TIMEOUT, LspClient, apply_edits  # noqa: E402
from tests.test_server import IMPLICIT_REENTRANT, LATE_BINDING, MODEL, TRAIN_FSDP, TRAIN_PLAIN, codes, project  # noqa: E402


@pytest.fixture
def client(tmp_path):
    clients: list[LspClient] = []

    def start(command: list[str] | None = None, env: dict[str, str] | None = None) -> LspClient:
        clients.append(LspClient(tmp_path, command, env))
        return clients[-1]

    yield start
    for started in clients:
        started.close()


def dedented(text: str) -> str:
    return textwrap.dedent(text).lstrip("\n")


WATCHING_CLIENT = {"workspace": {"didChangeWatchedFiles": {"dynamicRegistration": True}, "configuration": True}}


def test_watched_files_are_registered_and_a_checkout_refreshes_cross_file_findings(tmp_path, client):
    root = project(tmp_path, {"pkg/__init__.py": "", "pkg/model.py": MODEL})
    server = client()
    server.initialize(root, capabilities=WATCHING_CLIENT)
    registration = server.wait_for(lambda m: m.get("method") == "client/registerCapability", "the watchers' registration")
    [asked] = registration["params"]["registrations"]
    assert asked["method"] == "workspace/didChangeWatchedFiles"
    globs = {watcher["globPattern"] for watcher in asked["registerOptions"]["watchers"]}
    assert {"**/*.py", "**/*.ipynb", "**/pyproject.toml", "**/*.yaml", "**/*.sh", "**/requirements*.txt"} <= globs

    model = server.open(root / "pkg/model.py", (root / "pkg/model.py").read_text())
    assert codes(server.diagnostics(model)) == ["CKPT001"]
    # A checkout creates train.py, which wraps the model in FSDP: no buffer is saved.
    (root / "train.py").write_text(dedented(TRAIN_FSDP))
    server.notify("workspace/didChangeWatchedFiles", {"changes": [{"uri": (root / "train.py").as_uri(), "type": 1}]})
    assert codes(server.diagnostics(model, lambda d: codes(d) != ["CKPT001"])) == ["CKPT002"]
    # ... and the next checkout deletes it.
    (root / "train.py").unlink()
    server.notify("workspace/didChangeWatchedFiles", {"changes": [{"uri": (root / "train.py").as_uri(), "type": 3}]})
    assert codes(server.diagnostics(model, lambda d: codes(d) != ["CKPT002"])) == ["CKPT001"]

    # The client's settings change: the options of a `ckptlint` section apply, every buffer is linted again.
    server.notify("workspace/didChangeConfiguration", {"settings": {"ckptlint": {"ignore": ["CKPT001"]}}})
    assert server.diagnostics(model, lambda d: d == []) == []
    # A config file changed on disk is read again too.
    (root / "pyproject.toml").write_text("[project]\nname = 'demo'\n\n[tool.ckptlint]\nselect = ['CKPT030']\n")
    server.notify("workspace/didChangeWatchedFiles", {"changes": [{"uri": (root / "pyproject.toml").as_uri(), "type": 2}]})
    server.notify("workspace/didChangeConfiguration", {"settings": {"ckptlint": {}}})
    assert server.stop() == 0


def test_another_buffers_unsaved_text_counts_until_it_is_closed(tmp_path, client):
    root = project(tmp_path, {"pkg/__init__.py": "", "pkg/model.py": MODEL, "train.py": TRAIN_PLAIN})
    server = client()
    server.initialize(root)
    model = server.open(root / "pkg/model.py", (root / "pkg/model.py").read_text())
    assert codes(server.diagnostics(model)) == ["CKPT001"]
    train = server.open(root / "train.py", (root / "train.py").read_text())
    assert server.diagnostics(train) == []
    server.change(train, dedented(TRAIN_FSDP), version=2)  # typed, not saved
    assert codes(server.diagnostics(model, lambda d: codes(d) != ["CKPT001"])) == ["CKPT002"]
    server.close_document(train)  # closed without saving: the file on disk counts again
    assert codes(server.diagnostics(model, lambda d: codes(d) != ["CKPT002"])) == ["CKPT001"]
    assert server.stop() == 0


# --- notebooks -----------------------------------------------------------------------------

CELL_WITH_MAGIC = """\
%matplotlib inline
from torch.utils.checkpoint import checkpoint


def forward(block, x):
    return checkpoint(block, x)
"""


def test_notebook_cells_get_their_findings_and_fixes(tmp_path, client):
    root = project(tmp_path)
    notebook = root / "explore.ipynb"
    server = client()
    capabilities = server.initialize(root, capabilities={"notebookDocument": {"synchronization": {}}})["result"]["capabilities"]
    assert capabilities["notebookDocumentSync"]["notebookSelector"][0]["cells"] == [{"language": "python"}]
    late = LATE_BINDING.split("\n\n\n", 1)[1]  # CKPT030, with a safe fix
    intro, imports, code, loop = server.open_notebook(
        notebook,
        [("markdown", "# Exploring `checkpoint(block, x)`\n"), ("code", "import torch\n"), ("code", CELL_WITH_MAGIC), ("code", late)],
    )
    [finding] = server.diagnostics(code)
    assert finding["code"] == "CKPT001" and finding["range"]["start"] == {"line": 5, "character": 11}
    assert server.diagnostics(imports) == [] and server.diagnostics(intro) == []
    assert codes(server.diagnostics(loop)) == ["CKPT030"]

    start = finding["range"]["start"]
    actions = server.code_actions(code, start, start, [finding], only=["quickfix"])["result"]
    assert [list(a["edit"]["changes"]) for a in actions] == [[code], [code]]  # the fix and the noqa, in the cell
    assert apply_edits(CELL_WITH_MAGIC, actions[0]["edit"]["changes"][code]) == CELL_WITH_MAGIC.replace(
        "checkpoint(block, x)", "checkpoint(block, x, use_reentrant=False)"
    )
    [fix_all] = server.code_actions(code, start, start, [], only=["source.fixAll.ckptlint"])["result"]
    assert list(fix_all["edit"]["changes"]) == [loop]
    assert apply_edits(late, fix_all["edit"]["changes"][loop]) == late.replace("lambda t: block(t)", "lambda t, block=block: block(t)")

    fixed = CELL_WITH_MAGIC.replace("checkpoint(block, x)", "checkpoint(block, x, use_reentrant=False)")
    server.change_cell(notebook, 2, code, fixed, 2)
    assert server.diagnostics(code, lambda d: d == []) == []
    server.notify(
        "notebookDocument/didClose",
        {"notebookDocument": {"uri": notebook.as_uri()}, "cellTextDocuments": [{"uri": u} for u in (intro, imports, code, loop)]},
    )
    assert server.diagnostics(loop, lambda d: d == []) == []
    assert server.stop() == 0


def test_a_vscode_notebook_cell_opened_as_a_text_document_is_linted_as_a_cell(tmp_path, client):
    root = project(tmp_path)
    (root / "explore.ipynb").write_text('{"cells": [], "metadata": {}, "nbformat": 4, "nbformat_minor": 5}\n')
    server = client()
    server.initialize(root)
    uri = f"vscode-notebook-cell:{root / 'explore.ipynb'}#W2sZmlsZQ%3D%3D"
    server.notify("textDocument/didOpen", {"textDocument": {"uri": uri, "languageId": "python", "version": 1, "text": CELL_WITH_MAGIC}})
    [finding] = server.diagnostics(uri)  # not CKPT900 "invalid notebook JSON"
    assert finding["code"] == "CKPT001" and finding["range"]["start"]["line"] == 5
    assert server.stop() == 0


# --- worker processes ------------------------------------------------------------------------

# The server with one buffer made hostile: its analysis waits for the test to say go, then
# takes memory until the memory limit stops it; every other buffer is analysed as usual.
HOSTILE_ANALYSIS = """
import os, runpy, time
import ckptlint.server.buffers as buffers

real = buffers._analyse

def hostile(task):
    if task.path.name != "hostile.py":
        return real(task)
    gate = task.path.with_name("go")
    while not gate.exists():
        time.sleep(0.01)
    hoard = []
    while True:
        hoard.append(bytearray(8 << 20))
        hoard[-1][::4096] = b"x" * len(hoard[-1][::4096])

buffers._analyse = hostile
runpy.run_module("ckptlint", run_name="__main__", alter_sys=True)
"""


def children(pid: int) -> set[int]:
    found: set[int] = set()
    for thread in os.listdir(f"/proc/{pid}/task"):
        with open(f"/proc/{pid}/task/{thread}/children") as handle:
            found.update(int(child) for child in handle.read().split())
    return found


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="worker processes and /proc: Linux")
def test_a_hostile_buffer_is_stopped_at_the_limit_and_delays_no_other(tmp_path, client):
    root = project(tmp_path)
    server = client([sys.executable, "-c", HOSTILE_ANALYSIS, "server"], env={"CKPTLINT_FILE_MEMORY_LIMIT": "64"})
    server.initialize(root)
    hostile = server.open(root / "hostile.py", IMPLICIT_REENTRANT)
    fine = server.open(root / "fine.py", IMPLICIT_REENTRANT)
    # The hostile buffer's analysis is still waiting for the gate: the other's findings came first.
    assert codes(server.diagnostics(fine)) == ["CKPT001"]
    assert not [m for m in server.seen if m.get("params", {}).get("uri") == hostile]
    (root / "go").write_text("")
    [stopped] = server.diagnostics(hostile)
    assert stopped["code"] == "CKPT900" and "CKPTLINT_FILE_MEMORY_LIMIT" in stopped["message"]
    assert stopped["severity"] == 1

    # Typing on in the other buffer while the hostile one is analysed again.
    server.change(hostile, IMPLICIT_REENTRANT + "\n", version=2)
    server.change(fine, IMPLICIT_REENTRANT.replace("checkpoint(block, x)", "checkpoint(block, x, use_reentrant=False)"), version=2)
    assert server.diagnostics(fine, version=2) == []
    assert server.diagnostics(hostile, version=2)[0]["code"] == "CKPT900"

    # A closed buffer's worker process ends: the memory it held comes back.
    before = children(server.process.pid)
    assert before  # the other buffer's worker, idle between lints, keeps what it loaded
    server.close_document(fine)
    assert server.diagnostics(fine, lambda d: d == []) == []
    wait_until(lambda: not children(server.process.pid) & before, "the closed buffer's worker to end")
    assert server.stop() == 0


# The server with one buffer's first text made slow: its analysis says it started, then
# runs until it is cancelled (checking, as the engine does between its phases).
SLOW_ANALYSIS = """
import runpy
from ckptlint import cancellation
import ckptlint.server.buffers as buffers

real = buffers._analyse

def slow(task):
    if task.kind != "lint" or "# slow" not in task.text:
        return real(task)
    task.path.with_name("started").write_text("")
    while True:
        cancellation.check()

buffers._analyse = slow
runpy.run_module("ckptlint", run_name="__main__", alter_sys=True)
"""


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="worker processes and /proc: Linux")
def test_a_superseded_lint_stops_and_its_worker_lints_the_newer_text(tmp_path, client):
    root = project(tmp_path)
    server = client([sys.executable, "-c", SLOW_ANALYSIS, "server"])
    server.initialize(root)
    uri = server.open(root / "train.py", IMPLICIT_REENTRANT + "# slow\n")
    wait_until((root / "started").exists, "the slow lint to start")
    worker = children(server.process.pid)
    assert len(worker) == 1
    server.change(uri, IMPLICIT_REENTRANT, version=2)
    assert codes(server.diagnostics(uri, version=2)) == ["CKPT001"]
    assert children(server.process.pid) == worker  # cancelled, not killed: the same process
    assert server.stop() == 0


def wait_until(condition, what: str) -> None:
    """Poll for a state of the server's processes (the event has no message of its own)."""
    deadline = time.monotonic() + SAFETY_TIMEOUT
    while not condition():
        assert time.monotonic() < deadline, f"no {what}"
        time.sleep(0.01)


# --- a buffer's facts, from its lint ------------------------------------------------------------

FIXTURE_PROJECTS = Path(__file__).resolve().parent.parent / "fixtures"


def fixture_python_files() -> list[Path]:
    return sorted(p for p in FIXTURE_PROJECTS.rglob("*.py") if "__pycache__" not in p.parts)


def test_the_facts_a_lint_keeps_are_those_the_facts_task_extracts():
    """What the server lays over its index after a lint is what the index (and a `facts`
    task) would extract from the buffer's text, for every fixture file; edited too, so that
    the lint's own extraction (not the index's stored facts) is what comes back."""
    from ckptlint.server.buffers import Task, _analyse, _install
    from ckptlint.server.projects import EditorProjects

    projects = EditorProjects()
    kept = 0
    for path in fixture_python_files():
        snapshot = projects.snapshot_for(path)
        if snapshot.index is None:
            continue
        _install(snapshot)
        display = projects.display(path, snapshot.settings)
        for text in (path.read_text(), path.read_text() + "\n\ndef added_helper(model):\n    return model\n"):
            linted = _analyse(Task("lint", text, path, display))
            expected = _analyse(Task("facts", text, path, display))
            if linted.facts is not None:
                kept += 1
                assert linted.facts == expected, path
    assert kept > 50  # most fixture files reach a project rule


# --- a buffer's worker while its own facts change -------------------------------------------------

SHARDED_TRAIN = dedented("""
    import torch
    from torch.distributed.fsdp import FullyShardedDataParallel as FSDP
    from torch.utils.checkpoint import checkpoint


    class Model(torch.nn.Module):
        def forward(self, x):
            return checkpoint(self.block, x)


    def main():
        return FSDP(Model())
""")


def _buffer_lint(projects, worker, path: Path, text: str):
    """A lint as the server runs one: in the buffer's worker, with the snapshot of the moment;
    its facts laid over the index after. The findings, and whether other files can observe
    the change."""
    from ckptlint.server.buffers import Task

    snapshot = projects.snapshot_for(path)
    linted = worker.run(snapshot, Task("lint", text, path, projects.display(path, snapshot.settings)))
    observed = linted.facts is not None and projects.buffer_facts(path, linted.facts)
    return [(d.code, d.location.row) for d in linted.diagnostics], observed


def test_a_buffer_keeps_its_worker_while_only_its_own_facts_change(tmp_path):
    """Typing in `train.py` changes what other files see of it at nearly every keystroke (the
    lines of its FSDP use): its worker, and what that worker computed, stay; another buffer's
    change forks a new one. The findings are those of an analysis from scratch throughout."""
    from ckptlint.server.buffers import BufferWorker
    from ckptlint.server.projects import EditorProjects

    root = project(tmp_path, {"train.py": SHARDED_TRAIN, "pkg/model.py": MODEL})
    train, model = root / "train.py", root / "pkg" / "model.py"
    projects = EditorProjects()
    worker = BufferWorker(projects.limits)
    try:
        assert _buffer_lint(projects, worker, train, SHARDED_TRAIN) == ([("CKPT002", 8)], False)
        for typed in range(1, 4):
            text = "import os\n" * typed + SHARDED_TRAIN
            findings, observed = _buffer_lint(projects, worker, train, text)
            assert observed  # a new snapshot for the other buffers
            assert findings == [("CKPT002", 8 + typed)] == [(d.code, d.location.row) for d in EditorProjects().lint(text, train).diagnostics]
        assert worker.forks == 1
        # The FSDP use removed, then the text on disk again: each lint sees its own text's facts.
        unsharded = SHARDED_TRAIN.replace("return FSDP(Model())", "return Model()")
        assert _buffer_lint(projects, worker, train, unsharded) == ([("CKPT001", 8)], True)
        assert _buffer_lint(projects, worker, train, SHARDED_TRAIN) == ([("CKPT002", 8)], True)
        assert worker.forks == 1
        # Another buffer's unsaved facts change what this one is analysed with: a new worker.
        other = BufferWorker(projects.limits)
        try:
            assert _buffer_lint(projects, other, model, MODEL + "\n\ndef helper(model):\n    return model\n")[1]
        finally:
            other.close()
        assert _buffer_lint(projects, worker, train, SHARDED_TRAIN) == ([("CKPT002", 8)], False)
        assert worker.forks == 2
    finally:
        worker.close()


def test_a_buffer_back_to_its_text_on_disk_is_analysed_with_that_texts_facts(tmp_path):
    """The index's facts of an open buffer are those of its last lint; when the buffer is
    back to the text on disk, its analysis takes that text's facts, not the overlaid ones."""
    from ckptlint.server.projects import EditorProjects

    root = project(tmp_path, {"train.py": SHARDED_TRAIN})
    train = root / "train.py"
    projects = EditorProjects()
    unsharded = SHARDED_TRAIN.replace("return FSDP(Model())", "return Model()")
    linted = projects.lint(unsharded, train)
    assert [d.code for d in linted.diagnostics] == ["CKPT001"] and projects.buffer_facts(train, linted.facts)
    assert [d.code for d in projects.lint(SHARDED_TRAIN, train).diagnostics] == ["CKPT002"]
