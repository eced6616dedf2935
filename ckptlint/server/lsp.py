"""`ckptlint server`: the Language Server Protocol over stdio, a thin shell (pygls, with
lsprotocol's typed messages) over `EditorProjects`, the buffers' workers and the pure actions.

- Diagnostics on open, on save and on change (the unsaved text; a change supersedes the
  lint it finds scheduled, which waits `DEBOUNCE_SECONDS` for further typing, and stops
  the one in progress at its next safe point, its worker kept).
- Each buffer is analysed in a worker process of its own under the command line's per-file
  time and memory limits (`ckptlint.server.buffers`): a buffer that hits one gets CKPT900
  and never delays another's diagnostics; its memory comes back when it closes.
- Notebooks through LSP's notebook synchronisation, findings published in their cells
  (`ckptlint.server.notebook_buffers`).
- Code actions: a finding's fix, its `# noqa` suppression, every safe fix of the file.
- Files changed on disk (another document saved, `workspace/didChangeWatchedFiles`, which
  the server registers for) refresh the project index; so do the open buffers' unsaved
  facts. The open buffers whose findings may change with them are linted again;
  `workspace/didChangeConfiguration` reads every setting again and lints them all.
- The index work runs in one thread and the workers are waited for in others, so requests
  are answered meanwhile; an exception in one message is logged (`window/logMessage`) and
  answered with an error, and the server goes on.
"""

from __future__ import annotations

import asyncio
import functools
import sys
import traceback
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import unquote, urlparse

from lsprotocol import types
from pygls.exceptions import FeatureRequestError
from pygls.lsp.server import LanguageServer
from pygls.uris import to_fs_path

from ckptlint import __version__
from ckptlint.config import CONFIG_FILES, ConfigError, Overrides
from ckptlint.declarations import LOCK_FILES
from ckptlint.discovery import INDEXED_SUFFIXES
from ckptlint.limits import AnalysisLimits, LimitError
from ckptlint.model.syntax.file_kinds import CONFIGURATION_SUFFIXES
from ckptlint.server.actions import FIX_ALL_TITLE, comment_style, finding_actions, fix_all_action, has_safe_fix, wanted
from ckptlint.server.buffers import BufferFacts, BufferLint, BufferWorker, Task, stopped
from ckptlint.server.edits import DocumentPositions, edits_between
from ckptlint.server.lsp_values import editor_range, lsp_code_action, lsp_diagnostic, span, text_edit, touches
from ckptlint.server.notebook_buffers import Cell, by_cell, fixed_cells, is_cell_uri, notebook_text
from ckptlint.server.options import overrides_from_options
from ckptlint.server.projects import EditorProjects
from ckptlint.server.types import FIX_ALL, QUICK_FIX, EditorAction, PositionEncoding
from ckptlint.worker_pool import TaskFailure

# How long a change waits for the next keystroke before the buffer is linted: short, since a
# lint that the next keystroke supersedes stops at its next safe point and keeps its worker.
DEBOUNCE_SECONDS = 0.15
# How long files changed on disk are gathered before the index is refreshed (a checkout
# reports hundreds, one by one).
WATCHED_FILES_SECONDS = 0.2
# Files whose change on disk may change findings (the watchers a client is asked for):
# what the project index reads, and what settings and declared versions are read from.
WATCHED_GLOBS = (
    *(f"**/*{suffix}" for suffix in (*INDEXED_SUFFIXES, *CONFIGURATION_SUFFIXES, ".json")),
    *(f"**/{name}" for name in (*CONFIG_FILES, *LOCK_FILES, "setup.cfg", "setup.py", ".gitignore")),
    "**/requirements*.txt", "**/environment*.y*ml", "**/conda*.y*ml", "**/env*.y*ml",
)
# The notebooks served through notebook synchronisation: every notebook, its Python cells.
NOTEBOOK_SYNC = types.NotebookDocumentSyncOptions(
    notebook_selector=[
        types.NotebookDocumentFilterWithCells(
            notebook="*", cells=[types.NotebookCellLanguage(language="python")]
        )
    ],
    save=True,
)

_ENCODINGS = {
    types.PositionEncodingKind.Utf8: PositionEncoding.UTF8,
    types.PositionEncodingKind.Utf32: PositionEncoding.UTF32,
}


@dataclass(frozen=True)
class OpenBuffer:
    """What one analysis covers: a text document, or a notebook (`cells`: every cell, in
    order). `key` is the document's URI (the notebook's for a notebook); `text` what is
    analysed (a notebook's as its `.ipynb` text)."""

    key: str
    version: int | None
    text: str
    path: Path
    cells: tuple[Cell, ...] | None = None


class CkptlintServer(LanguageServer):
    def __init__(self) -> None:
        super().__init__(
            "ckptlint",
            __version__,
            text_document_sync_kind=types.TextDocumentSyncKind.Full,
            notebook_document_sync=NOTEBOOK_SYNC,
        )
        self.projects = EditorProjects()
        self.limits = AnalysisLimits()
        self.workspace_root: Path | None = None
        self.shutdown_requested = False
        # The settings and indexes are read and refreshed here, one task at a time
        # (`EditorProjects` is not thread-safe); the event loop stays free.
        self.indexer = ThreadPoolExecutor(max_workers=1, thread_name_prefix="ckptlint-index")
        # Each buffer's worker is waited for in a thread of its own: a slow one holds no other.
        self.waiters = ThreadPoolExecutor(max_workers=32, thread_name_prefix="ckptlint-buffer")
        self.workers: dict[str, BufferWorker] = {}  # buffer key -> its worker
        self.scheduled: dict[str, asyncio.Task] = {}
        self.linted: dict[str, tuple[int | None, BufferLint]] = {}  # buffer key -> (version, lint)
        self.facts_sent: dict[str, tuple[str, ...]] = {}  # buffer key -> the text whose facts the index has
        self.logged_problems: dict[str, tuple[str, ...]] = {}
        self.shown_errors: set[str] = set()
        self.pending_changes: set[Path] = set()
        self.pending_flush: asyncio.TimerHandle | None = None

    # --- messages to the client --------------------------------------------------------

    def log(self, message: str, kind: types.MessageType = types.MessageType.Info) -> None:
        self.window_log_message(types.LogMessageParams(type=kind, message=message))

    def show_error_once(self, message: str) -> None:
        """A problem the user must fix (a config file), shown once, not at every keystroke."""
        self.log(message, types.MessageType.Error)
        if message not in self.shown_errors:
            self.shown_errors.add(message)
            self.window_show_message(types.ShowMessageParams(type=types.MessageType.Error, message=f"ckptlint: {message}"))

    def report_server_error(self, error, source) -> None:
        # pygls' own reports (a message it could not decode): logged, never shown on every
        # event. A failed request is logged with its traceback by `_logged` already.
        if source is not FeatureRequestError:
            self.log(f"ckptlint server error: {error}", types.MessageType.Error)

    # --- documents ---------------------------------------------------------------------

    @property
    def encoding(self) -> PositionEncoding:
        return _ENCODINGS.get(self.workspace.position_encoding, PositionEncoding.UTF16)

    def path_of(self, uri: str) -> Path:
        """The file a buffer is; a buffer with no file (`untitled:`) is linted as a file of
        that name in the workspace root; a notebook cell, as its notebook."""
        path = to_fs_path(uri) if uri.startswith("file:") else None
        if path:
            return Path(path)
        parsed = urlparse(uri)
        if is_cell_uri(uri) and parsed.path:
            return Path(unquote(parsed.path))
        name = Path(parsed.path).name or "untitled"
        return (self.workspace_root or Path.cwd()) / (name if "." in name else f"{name}.py")

    def notebook_of_cell(self, uri: str):
        return self.workspace.get_notebook_document(cell_uri=uri)

    def buffer(self, key: str) -> OpenBuffer | None:
        """The open buffer `key` names now (None when it is closed)."""
        notebook = self.workspace.notebook_documents.get(unquote(key))
        if notebook is not None:
            cells = []
            for cell in notebook.cells:
                document = self.workspace.text_documents.get(unquote(cell.document))
                text = document.source if document is not None else ""
                language = document.language_id if document is not None else "python"
                code = cell.kind == types.NotebookCellKind.Code and (language or "python") == "python"
                cells.append(Cell(cell.document, text, code))
            cells = tuple(cells)
            return OpenBuffer(key, notebook.version, notebook_text(cells), self.path_of(notebook.uri), cells)
        document = self.workspace.text_documents.get(unquote(key))
        if document is None or self.notebook_of_cell(key) is not None:
            return None  # a synchronised notebook's cell is analysed with its notebook
        if is_cell_uri(key):
            cells = (Cell(key, document.source, True),)
            return OpenBuffer(key, document.version, notebook_text(cells), self.path_of(key), cells)
        return OpenBuffer(key, document.version, document.source, self.path_of(key))

    def open_buffers(self) -> dict[str, OpenBuffer]:
        keys = [*self.workspace.notebook_documents, *self.workspace.text_documents]
        return {key: buffer for key in keys if (buffer := self.buffer(key)) is not None}

    async def in_indexer(self, function, *args):
        return await asyncio.get_running_loop().run_in_executor(self.indexer, function, *args)

    async def in_worker(self, buffer: OpenBuffer, kind: str):
        """Run a task on the buffer's text in its worker process: (settings, task, outcome)."""
        snapshot = await self.in_indexer(self.projects.snapshot_for, buffer.path)
        worker = self.workers.get(buffer.key)
        if worker is None:
            worker = self.workers[buffer.key] = BufferWorker(self.limits)
        task = Task(kind, buffer.text, buffer.path, self.projects.display(buffer.path, snapshot.settings))
        owner = asyncio.current_task()  # a scheduled lint, or a request's handler
        outcome = await asyncio.get_running_loop().run_in_executor(self.waiters, worker.run, snapshot, task, owner)
        return snapshot, task, outcome

    async def lint(self, key: str) -> tuple[OpenBuffer, BufferLint] | None:
        """The lint of the buffer's current text (reused when its version was linted
        already); None when the buffer is closed, or changed while it was being linted."""
        buffer = self.buffer(key)
        if buffer is None:
            return None
        known = self.linted.get(key)
        if known is not None and known[0] == buffer.version and known[1].text == buffer.text:
            return buffer, known[1]
        try:
            linted = await self.in_indexer(self.projects.too_large, buffer.text, buffer.path)
            if linted is None:
                snapshot, task, outcome = await self.in_worker(buffer, "lint")
                if isinstance(outcome, TaskFailure):
                    linted = stopped(task, snapshot.settings, self.limits, outcome)
                elif outcome is None:
                    return None  # closed meanwhile
                else:
                    linted = outcome
        except ConfigError as error:
            self.show_error_once(str(error))
            linted = BufferLint(buffer.text)
        current = self.buffer(key)
        if current is None or current.version != buffer.version or current.text != buffer.text:
            return None
        self.linted[key] = (buffer.version, linted)
        if linted.problems != self.logged_problems.get(key, ()):
            self.logged_problems[key] = linted.problems
            for problem in linted.problems:
                self.log(problem, types.MessageType.Warning)
        return buffer, linted

    async def update_facts(self, buffer: OpenBuffer, facts: BufferFacts | None = None) -> None:
        """After its findings are out: the buffer's facts (those its lint extracted, else
        extracted now in the buffer's worker, where a hostile text stops at a limit), laid
        over its project's index; the project's other open buffers linted again when other
        files can observe the change."""
        if facts is None:
            _, _, facts = await self.in_worker(buffer, "facts")
        if isinstance(facts, TaskFailure) or facts is None:
            return
        current = self.buffer(buffer.key)
        if current is None or current.text != buffer.text:
            return  # a newer text will say
        if await self.in_indexer(self.projects.buffer_facts, buffer.path, facts):
            self.lint_others(buffer.key, buffer.path, await self.in_indexer(self.projects.root_of, buffer.path))

    def lint_others(self, key: str, path: Path, root: Path | None) -> None:
        """What other files can observe of this buffer changed: lint its project's other
        open buffers again."""
        for other, buffer in self.open_buffers().items():
            if other != key and buffer.path != path and root is not None and root in buffer.path.parents:
                self.linted.pop(other, None)
                self.schedule(other)

    def schedule(self, key: str, delay: float = 0.0) -> None:
        """Lint the buffer and publish its diagnostics, superseding a lint scheduled before
        (and stopping one in progress)."""
        previous = self.scheduled.pop(key, None)
        if previous is not None and not previous.done():
            previous.cancel()
            worker = self.workers.get(key)
            if worker is not None:
                # Only the superseded lint's own task: the worker may be running a code
                # action's lint or fixes meanwhile, which killing would answer with nothing
                # (or a CKPT900 lint kept for this version).
                worker.cancel(owner=previous)
        self.scheduled[key] = asyncio.ensure_future(self._lint_and_publish(key, delay))

    async def _lint_and_publish(self, key: str, delay: float) -> None:
        try:
            if delay:
                await asyncio.sleep(delay)
            result = await self.lint(key)
            if result is not None:
                self.publish(*result)
                if result[1].text not in self.facts_sent.get(key, ()):
                    self.facts_sent[key] = (result[1].text,)
                    await self.update_facts(result[0], result[1].facts)
        except asyncio.CancelledError:
            raise
        except Exception:
            self.log(f"ckptlint: linting {key} failed:\n{traceback.format_exc()}", types.MessageType.Error)

    def publish(self, buffer: OpenBuffer, linted: BufferLint) -> None:
        if buffer.cells is None:
            positions = DocumentPositions(linted.text, self.encoding)
            self._publish(buffer.key, buffer.version, [lsp_diagnostic(d, positions) for d in linted.diagnostics])
            return
        for cell, placed in zip(buffer.cells, by_cell(linted.diagnostics, buffer.cells).values()):
            positions = DocumentPositions(cell.text, self.encoding)
            document = self.workspace.text_documents.get(unquote(cell.uri))
            version = document.version if document is not None and buffer.key == cell.uri else None
            self._publish(cell.uri, version, [lsp_diagnostic(d, positions) for d in placed])

    def _publish(self, uri: str, version: int | None, diagnostics: list[types.Diagnostic]) -> None:
        self.text_document_publish_diagnostics(types.PublishDiagnosticsParams(uri=uri, version=version, diagnostics=diagnostics))

    async def forget(self, key: str, cells: tuple[Cell, ...] | None = None) -> None:
        """The buffer is closed: its lint stops, its worker process ends, its unsaved facts
        leave the index, and its diagnostics are cleared."""
        task = self.scheduled.pop(key, None)
        if task is not None:
            task.cancel()
        worker = self.workers.pop(key, None)
        if worker is not None:
            worker.cancel(facts_too=True)
            asyncio.get_running_loop().run_in_executor(self.waiters, worker.close)
        self.linted.pop(key, None)
        self.facts_sent.pop(key, None)
        self.logged_problems.pop(key, None)
        for uri in [cell.uri for cell in cells] if cells else [key]:
            self._publish(uri, None, [])
        path = self.path_of(key)
        if await self.in_indexer(self.projects.buffer_closed, path):
            self.lint_others(key, path, await self.in_indexer(self.projects.root_of, path))

    async def saved(self, uri: str) -> None:
        """A document (or notebook) saved: linted again, and on disk it now counts for the
        other files of its project."""
        self.schedule(uri)
        if uri.startswith("file:"):
            await self.files_changed([self.path_of(uri)])

    async def files_changed(self, paths: list[Path]) -> None:
        """Refresh what depends on files changed on disk; lint the open buffers again whose
        findings may change with them."""
        buffers = self.open_buffers()
        by_path: dict[Path, list[str]] = {}
        for key, buffer in buffers.items():
            by_path.setdefault(buffer.path, []).append(key)
        try:
            stale = await self.in_indexer(self.projects.files_changed, paths, list(by_path))
        except ConfigError as error:
            self.show_error_once(str(error))
            return
        for path in stale:
            for key in by_path[path]:
                self.linted.pop(key, None)
                self.schedule(key)

    def file_changed_on_disk(self, paths: list[Path]) -> None:
        """Gather the files a client reports changed for `WATCHED_FILES_SECONDS`, then refresh
        once."""
        self.pending_changes.update(paths)
        if self.pending_flush is None:
            self.pending_flush = asyncio.get_running_loop().call_later(WATCHED_FILES_SECONDS, self._flush_changes)

    def _flush_changes(self) -> None:
        self.pending_flush = None
        paths, self.pending_changes = sorted(self.pending_changes), set()
        asyncio.ensure_future(self._logged_refresh(paths))

    async def _logged_refresh(self, paths: list[Path]) -> None:
        try:
            await self.files_changed(paths)
        except Exception:
            self.log(f"ckptlint: refreshing after files changed failed:\n{traceback.format_exc()}", types.MessageType.Error)

    async def configuration_changed(self, settings) -> None:
        """The client's settings changed: options from a `ckptlint` section (or the settings
        themselves, when they are ckptlint's options), every config file read again, every
        open buffer linted again."""
        overrides = None
        options = settings.get("ckptlint") if isinstance(settings, dict) and "ckptlint" in settings else None
        if options is not None:
            try:
                overrides = overrides_from_options(options, self.workspace_root)
            except ConfigError as error:
                self.show_error_once(f"{error}; the options are ignored")
        await self.in_indexer(self.projects.reset, overrides)
        self.shown_errors.clear()
        for key in self.open_buffers():
            self.linted.pop(key, None)
            self.schedule(key)

    # --- code actions ------------------------------------------------------------------

    async def code_actions(self, params: types.CodeActionParams) -> list[types.CodeAction]:
        uri = params.text_document.uri
        notebook = self.notebook_of_cell(uri)
        key = notebook.uri if notebook is not None else uri
        result = await self.lint(key)
        if result is None:
            return []
        buffer, linted = result
        if buffer.cells is not None:
            return await self.cell_code_actions(params, buffer, linted)
        path = buffer.path
        positions = DocumentPositions(linted.text, self.encoding)
        asked = editor_range(params.range)
        only = params.context.only
        actions: list[EditorAction] = []
        if wanted(QUICK_FIX, only):
            comments = comment_style(path, linted.text)
            for diagnostic in linted.diagnostics:
                if touches(span(diagnostic, positions), asked):
                    actions.extend(finding_actions(linted.text, diagnostic, comments=comments, encoding=self.encoding))
        if wanted(FIX_ALL, only) and has_safe_fix(linted.diagnostics):
            fixed = await self.fixed(buffer)
            if fixed is None:
                return []  # edits of a text that is gone: the client asks again
            action = fix_all_action(linted.text, fixed, self.encoding)
            if action is not None:
                actions.append(action)
        return [lsp_code_action(uri, action, positions) for action in actions]

    async def fixed(self, buffer: OpenBuffer) -> str | None:
        """The buffer's text with every safe fix, computed in its worker; None when the fixes
        could not be computed or the buffer changed meanwhile."""
        _, _, outcome = await self.in_worker(buffer, "fix")
        current = self.buffer(buffer.key)
        if isinstance(outcome, TaskFailure) or outcome is None or current is None or current.version != buffer.version:
            return None
        return outcome

    async def cell_code_actions(self, params: types.CodeActionParams, buffer: OpenBuffer, linted: BufferLint):
        """A notebook cell's actions: its findings' fixes and suppressions, within the cell;
        the fix-all edits every cell it changes."""
        uri = params.text_document.uri
        cell = next((cell for cell in buffer.cells if cell.uri == uri), None)
        if cell is None:
            return []
        placed = by_cell(linted.diagnostics, buffer.cells)
        positions = DocumentPositions(cell.text, self.encoding)
        asked = editor_range(params.range)
        only = params.context.only
        actions = []
        if wanted(QUICK_FIX, only):
            for diagnostic in placed[uri]:
                if touches(span(diagnostic, positions), asked):
                    found = finding_actions(cell.text, diagnostic, comments="python", encoding=self.encoding)
                    actions.extend(lsp_code_action(uri, action, positions) for action in found)
        if wanted(FIX_ALL, only) and has_safe_fix(linted.diagnostics):
            fixed = await self.fixed(buffer)
            changed = fixed_cells(buffer.cells, fixed) if fixed is not None else {}
            if changed:
                edits = {
                    cell.uri: [text_edit(change) for change in edits_between(cell.text, changed[cell.uri], self.encoding)]
                    for cell in buffer.cells
                    if cell.uri in changed
                }
                actions.append(
                    types.CodeAction(title=FIX_ALL_TITLE, kind=FIX_ALL, edit=types.WorkspaceEdit(changes=edits))
                )
        return actions

    def shut_down(self) -> None:
        for key in list(self.scheduled):
            task = self.scheduled.pop(key)
            task.cancel()
        for worker in self.workers.values():
            worker.close()
        self.workers.clear()
        self.indexer.shutdown(wait=False, cancel_futures=True)
        self.waiters.shutdown(wait=False, cancel_futures=True)


# --- the server ------------------------------------------------------------------------------


def _logged(server: CkptlintServer, *, request: bool):
    """An exception in a handler is logged with its traceback; a request is then answered
    with an error (by pygls), a notification is dropped. Either way the server goes on."""

    def decorate(handler):
        def report(name: str) -> None:
            server.log(f"ckptlint: {name} failed:\n{traceback.format_exc()}", types.MessageType.Error)

        if asyncio.iscoroutinefunction(handler):

            @functools.wraps(handler)
            async def run_async(params):
                try:
                    return await handler(params)
                except Exception:
                    report(handler.__name__)
                    if request:
                        raise

            return run_async

        @functools.wraps(handler)
        def run(params):
            try:
                return handler(params)
            except Exception:
                report(handler.__name__)
                if request:
                    raise

        return run

    return decorate


def create_server() -> CkptlintServer:
    server = CkptlintServer()
    notification, request = _logged(server, request=False), _logged(server, request=True)

    @server.feature(types.INITIALIZE)
    @request
    def initialize(params: types.InitializeParams) -> None:
        folders = params.workspace_folders or []
        root_uri = params.root_uri or (folders[0].uri if folders else None)
        root = to_fs_path(root_uri) if root_uri else params.root_path
        server.workspace_root = Path(root) if root else None
        overrides = Overrides()
        try:
            overrides = overrides_from_options(params.initialization_options, server.workspace_root)
        except ConfigError as error:
            server.show_error_once(f"{error}; the options are ignored")
        try:
            limits = AnalysisLimits.from_environment()
        except LimitError as error:
            server.show_error_once(f"{error}; the default limits apply")
            limits = AnalysisLimits()
        server.limits = limits
        server.projects = EditorProjects(overrides, limits)

    @server.feature(types.INITIALIZED)
    @notification
    async def initialized(params: types.InitializedParams) -> None:
        # The workers fork from this process: libcst and the rules imported once here are
        # theirs without importing (0.2 s and more apiece).
        await server.in_indexer(_import_rules)
        watched = server.client_capabilities.workspace and server.client_capabilities.workspace.did_change_watched_files
        if watched and watched.dynamic_registration:
            options = types.DidChangeWatchedFilesRegistrationOptions(
                watchers=[types.FileSystemWatcher(glob_pattern=glob) for glob in WATCHED_GLOBS]
            )
            registration = types.Registration(
                id="ckptlint-watched-files", method=types.WORKSPACE_DID_CHANGE_WATCHED_FILES, register_options=options
            )
            try:
                await server.client_register_capability_async(types.RegistrationParams(registrations=[registration]))
            except Exception as error:  # the client refused: the server still works, saves still refresh
                server.log(f"ckptlint: the client did not register the file watchers: {error}", types.MessageType.Warning)

    @server.feature(types.TEXT_DOCUMENT_DID_OPEN)
    @notification
    def did_open(params: types.DidOpenTextDocumentParams) -> None:
        server.schedule(params.text_document.uri)

    @server.feature(types.TEXT_DOCUMENT_DID_CHANGE)
    @notification
    def did_change(params: types.DidChangeTextDocumentParams) -> None:
        server.schedule(params.text_document.uri, DEBOUNCE_SECONDS)

    @server.feature(types.TEXT_DOCUMENT_DID_SAVE)
    @notification
    async def did_save(params: types.DidSaveTextDocumentParams) -> None:
        await server.saved(params.text_document.uri)

    @server.feature(types.TEXT_DOCUMENT_DID_CLOSE)
    @notification
    async def did_close(params: types.DidCloseTextDocumentParams) -> None:
        await server.forget(params.text_document.uri)

    @server.feature(types.NOTEBOOK_DOCUMENT_DID_OPEN)
    @notification
    def notebook_did_open(params: types.DidOpenNotebookDocumentParams) -> None:
        server.schedule(params.notebook_document.uri)

    @server.feature(types.NOTEBOOK_DOCUMENT_DID_CHANGE)
    @notification
    async def notebook_did_change(params: types.DidChangeNotebookDocumentParams) -> None:
        uri = params.notebook_document.uri
        removed = []
        structure = params.change.cells.structure if params.change.cells is not None else None
        if structure is not None and structure.did_close:
            removed = [document.uri for document in structure.did_close]
        for cell_uri in removed:  # a deleted cell's findings go with it
            server._publish(cell_uri, None, [])
        server.schedule(uri, DEBOUNCE_SECONDS)

    @server.feature(types.NOTEBOOK_DOCUMENT_DID_SAVE)
    @notification
    async def notebook_did_save(params: types.DidSaveNotebookDocumentParams) -> None:
        await server.saved(params.notebook_document.uri)

    @server.feature(types.NOTEBOOK_DOCUMENT_DID_CLOSE)
    @notification
    async def notebook_did_close(params: types.DidCloseNotebookDocumentParams) -> None:
        cells = tuple(Cell(document.uri, "", True) for document in params.cell_text_documents)
        await server.forget(params.notebook_document.uri, cells)

    @server.feature(types.WORKSPACE_DID_CHANGE_WATCHED_FILES)
    @notification
    def did_change_watched_files(params: types.DidChangeWatchedFilesParams) -> None:
        paths = [Path(path) for change in params.changes if (path := to_fs_path(change.uri))]
        if paths:
            server.file_changed_on_disk(paths)

    @server.feature(types.WORKSPACE_DID_CHANGE_CONFIGURATION)
    @notification
    async def did_change_configuration(params: types.DidChangeConfigurationParams) -> None:
        await server.configuration_changed(params.settings)

    @server.feature(
        types.TEXT_DOCUMENT_CODE_ACTION,
        types.CodeActionOptions(code_action_kinds=[types.CodeActionKind.QuickFix, FIX_ALL], resolve_provider=False),
    )
    @request
    async def code_action(params: types.CodeActionParams) -> list[types.CodeAction]:
        return await code_actions_for(server, params)

    @server.feature(types.SHUTDOWN)
    @request
    def shutdown(params: None) -> None:
        server.shutdown_requested = True
        server.shut_down()

    return server


def _import_rules() -> None:
    from ckptlint.engine import import_rules

    import_rules()


async def code_actions_for(server: CkptlintServer, params: types.CodeActionParams) -> list[types.CodeAction]:
    """The code actions for a range of a buffer (a module-level seam: see `code_action`)."""
    return await server.code_actions(params)


def serve() -> int:
    """Serve one client over stdin / stdout until it sends `exit`. The exit status is 0
    after a `shutdown` request, 1 without one (as LSP asks)."""
    protocol_out = sys.stdout.buffer
    # Nothing but the protocol may reach stdout: a stray print would corrupt it.
    sys.stdout = sys.stderr
    server = create_server()
    try:
        server.start_io(sys.stdin.buffer, protocol_out)
    finally:
        for worker in server.workers.values():  # `exit` without `shutdown`: no worker outlives the server
            worker.close()
    return 0 if server.shutdown_requested else 1
