"""`ckptlint server`: the Language Server Protocol over stdio, a thin shell (pygls, with
lsprotocol's typed messages) over `EditorProjects` and the pure actions.

- Diagnostics on open, on save and on change (the unsaved text; a change supersedes the
  lint it finds scheduled, which waits `DEBOUNCE_SECONDS` for further typing).
- Code actions: a finding's fix, its `# noqa` suppression, every safe fix of the file.
- Files changed on disk (another document saved, `workspace/didChangeWatchedFiles`) refresh
  the project index; the open buffers whose findings may change with it are linted again.
- Linting runs in one worker thread, so requests are answered meanwhile; an exception in
  one message is logged (`window/logMessage`) and answered with an error, and the server
  goes on.
"""

from __future__ import annotations

import asyncio
import functools
import sys
import traceback
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from urllib.parse import unquote, urlparse

from lsprotocol import types
from pygls.exceptions import FeatureRequestError
from pygls.lsp.server import LanguageServer
from pygls.uris import to_fs_path

from ckptlint import __version__
from ckptlint.config import ConfigError, Overrides
from ckptlint.limits import AnalysisLimits, LimitError
from ckptlint.rule_codes import UNUSED_NOQA
from ckptlint.server.actions import comment_style, finding_actions, fix_all_action, has_safe_fix, wanted
from ckptlint.server.edits import DocumentPositions
from ckptlint.server.options import overrides_from_options
from ckptlint.server.projects import BufferLint, EditorProjects
from ckptlint.server.types import FIX_ALL, QUICK_FIX, EditorAction, EditorPosition, PositionEncoding, TextChange
from ckptlint.types import Diagnostic, Severity

# How long a change waits for the next keystroke before the buffer is linted.
DEBOUNCE_SECONDS = 0.3
# Files whose change on disk may change findings (the watchers a client is asked for).
WATCHED_GLOBS = ("**/*.py", "**/pyproject.toml", "**/setup.cfg", "**/setup.py", "**/requirements*.txt", "**/environment*.y*ml", "**/conda*.y*ml", "**/env*.y*ml", "**/*ckptlint.toml", "**/.ckptlint.yaml")

_ENCODINGS = {
    types.PositionEncodingKind.Utf8: PositionEncoding.UTF8,
    types.PositionEncodingKind.Utf32: PositionEncoding.UTF32,
}


class CkptlintServer(LanguageServer):
    def __init__(self) -> None:
        super().__init__("ckptlint", __version__, text_document_sync_kind=types.TextDocumentSyncKind.Full)
        self.projects = EditorProjects()
        self.workspace_root: Path | None = None
        self.shutdown_requested = False
        # Every lint and index refresh runs here, one at a time (`EditorProjects` is not
        # thread-safe); the event loop stays free to answer requests.
        self.linter = ThreadPoolExecutor(max_workers=1, thread_name_prefix="ckptlint-lint")
        self.scheduled: dict[str, asyncio.Task] = {}
        self.linted: dict[str, tuple[int | None, BufferLint]] = {}  # uri -> (version, lint)
        self.logged_problems: dict[str, tuple[str, ...]] = {}
        self.shown_errors: set[str] = set()

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

    def open_document(self, uri: str):
        return self.workspace.text_documents.get(unquote(uri))

    def path_of(self, uri: str) -> Path:
        """The file a buffer is; a buffer with no file (`untitled:`) is linted as a file of
        that name in the workspace root."""
        path = to_fs_path(uri) if uri.startswith("file:") else None
        if path:
            return Path(path)
        name = Path(urlparse(uri).path).name or "untitled"
        return (self.workspace_root or Path.cwd()) / (name if "." in name else f"{name}.py")

    async def in_linter(self, function, *args):
        return await asyncio.get_running_loop().run_in_executor(self.linter, function, *args)

    async def lint(self, uri: str) -> tuple[int | None, BufferLint] | None:
        """The lint of the buffer's current text (reused when its version was linted
        already); None when the buffer is closed, or changed while it was being linted."""
        document = self.open_document(uri)
        if document is None:
            return None
        version, text = document.version, document.source
        known = self.linted.get(uri)
        if known is not None and known[0] == version and known[1].text == text:
            return known
        try:
            linted = await self.in_linter(self.projects.lint, text, self.path_of(uri))
        except ConfigError as error:
            self.show_error_once(str(error))
            linted = BufferLint(text)
        current = self.open_document(uri)
        if current is None or current.version != version or current.source != text:
            return None
        self.linted[uri] = (version, linted)
        if linted.problems != self.logged_problems.get(uri, ()):
            self.logged_problems[uri] = linted.problems
            for problem in linted.problems:
                self.log(problem, types.MessageType.Warning)
        return version, linted

    def schedule(self, uri: str, delay: float = 0.0) -> None:
        """Lint the buffer and publish its diagnostics, superseding a lint scheduled before."""
        previous = self.scheduled.pop(uri, None)
        if previous is not None:
            previous.cancel()
        self.scheduled[uri] = asyncio.ensure_future(self._lint_and_publish(uri, delay))

    async def _lint_and_publish(self, uri: str, delay: float) -> None:
        try:
            if delay:
                await asyncio.sleep(delay)
            result = await self.lint(uri)
            if result is not None:
                version, linted = result
                positions = DocumentPositions(linted.text, self.encoding)
                self.text_document_publish_diagnostics(
                    types.PublishDiagnosticsParams(
                        uri=uri, version=version, diagnostics=[lsp_diagnostic(d, positions) for d in linted.diagnostics]
                    )
                )
        except asyncio.CancelledError:
            raise
        except Exception:
            self.log(f"ckptlint: linting {uri} failed:\n{traceback.format_exc()}", types.MessageType.Error)

    def forget(self, uri: str) -> None:
        task = self.scheduled.pop(uri, None)
        if task is not None:
            task.cancel()
        self.linted.pop(uri, None)
        self.logged_problems.pop(uri, None)

    async def files_changed(self, paths: list[Path]) -> None:
        """Refresh what depends on files changed on disk; lint the open buffers again whose
        findings may change with them."""
        open_uris = {self.path_of(document.uri): document.uri for document in self.workspace.text_documents.values()}
        try:
            stale = await self.in_linter(self.projects.files_changed, paths, list(open_uris))
        except ConfigError as error:
            self.show_error_once(str(error))
            return
        for path in stale:
            self.linted.pop(open_uris[path], None)
            self.schedule(open_uris[path])

    # --- code actions ------------------------------------------------------------------

    async def code_actions(self, params: types.CodeActionParams) -> list[types.CodeAction]:
        uri = params.text_document.uri
        result = await self.lint(uri)
        if result is None:
            return []
        version, linted = result
        path = self.path_of(uri)
        positions = DocumentPositions(linted.text, self.encoding)
        asked = _editor_range(params.range)
        only = params.context.only
        actions: list[EditorAction] = []
        if wanted(QUICK_FIX, only):
            comments = comment_style(path, linted.text)
            for diagnostic in linted.diagnostics:
                if _touches(_span(diagnostic, positions), asked):
                    actions.extend(finding_actions(linted.text, diagnostic, comments=comments, encoding=self.encoding))
        if wanted(FIX_ALL, only) and has_safe_fix(linted.diagnostics):
            fixed = await self.in_linter(self.projects.fix_all, linted.text, path)
            current = self.open_document(uri)
            if current is None or current.version != version:
                return []  # edits of a text that is gone: the client asks again
            action = fix_all_action(linted.text, fixed, self.encoding)
            if action is not None:
                actions.append(action)
        return [lsp_code_action(uri, action, positions) for action in actions]


# --- lsprotocol values ---------------------------------------------------------------------


def _editor_range(lsp_range: types.Range) -> tuple[EditorPosition, EditorPosition]:
    return (
        EditorPosition(lsp_range.start.line, lsp_range.start.character),
        EditorPosition(lsp_range.end.line, lsp_range.end.character),
    )


def _span(diagnostic: Diagnostic, positions: DocumentPositions) -> tuple[EditorPosition, EditorPosition]:
    return positions.position(diagnostic.location), positions.position(diagnostic.end_location)


def _touches(a: tuple[EditorPosition, EditorPosition], b: tuple[EditorPosition, EditorPosition]) -> bool:
    """Whether two ranges overlap or touch (a cursor at either end of a finding counts)."""
    return a[0] <= b[1] and b[0] <= a[1]


def _lsp_position(position: EditorPosition) -> types.Position:
    return types.Position(line=position.line, character=position.character)


def _lsp_range(start: EditorPosition, end: EditorPosition) -> types.Range:
    return types.Range(start=_lsp_position(start), end=_lsp_position(end))


_LSP_SEVERITIES = {
    Severity.ERROR: types.DiagnosticSeverity.Error,
    Severity.WARNING: types.DiagnosticSeverity.Warning,
    Severity.INFO: types.DiagnosticSeverity.Information,
}


def lsp_diagnostic(diagnostic: Diagnostic, positions: DocumentPositions) -> types.Diagnostic:
    return types.Diagnostic(
        range=_lsp_range(*_span(diagnostic, positions)),
        severity=_LSP_SEVERITIES[diagnostic.severity],
        # An unused `# noqa` is shown faded, as editors show unused code.
        tags=[types.DiagnosticTag.Unnecessary] if diagnostic.code == UNUSED_NOQA.code else None,
        code=diagnostic.code,
        code_description=types.CodeDescription(href=diagnostic.url) if diagnostic.url else None,
        source="ckptlint",
        message=diagnostic.message,
    )


def _text_edit(change: TextChange) -> types.TextEdit:
    return types.TextEdit(range=_lsp_range(change.start, change.end), new_text=change.new_text)


def lsp_code_action(uri: str, action: EditorAction, positions: DocumentPositions) -> types.CodeAction:
    return types.CodeAction(
        title=action.title,
        kind=action.kind,
        diagnostics=[lsp_diagnostic(action.diagnostic, positions)] if action.diagnostic is not None else None,
        is_preferred=action.preferred or None,
        edit=types.WorkspaceEdit(changes={uri: [_text_edit(change) for change in action.changes]}),
    )


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
        server.projects = EditorProjects(overrides, limits)

    @server.feature(types.INITIALIZED)
    @notification
    def initialized(params: types.InitializedParams) -> None:
        watched = server.client_capabilities.workspace and server.client_capabilities.workspace.did_change_watched_files
        if watched and watched.dynamic_registration:
            options = types.DidChangeWatchedFilesRegistrationOptions(
                watchers=[types.FileSystemWatcher(glob_pattern=glob) for glob in WATCHED_GLOBS]
            )
            registration = types.Registration(
                id="ckptlint-watched-files", method=types.WORKSPACE_DID_CHANGE_WATCHED_FILES, register_options=options
            )
            server.client_register_capability_async(types.RegistrationParams(registrations=[registration]))

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
        uri = params.text_document.uri
        server.schedule(uri)
        if uri.startswith("file:"):
            await server.files_changed([server.path_of(uri)])

    @server.feature(types.TEXT_DOCUMENT_DID_CLOSE)
    @notification
    def did_close(params: types.DidCloseTextDocumentParams) -> None:
        uri = params.text_document.uri
        server.forget(uri)
        server.text_document_publish_diagnostics(types.PublishDiagnosticsParams(uri=uri, diagnostics=[]))

    @server.feature(types.WORKSPACE_DID_CHANGE_WATCHED_FILES)
    @notification
    async def did_change_watched_files(params: types.DidChangeWatchedFilesParams) -> None:
        paths = [Path(path) for change in params.changes if (path := to_fs_path(change.uri))]
        if paths:
            await server.files_changed(paths)

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
        for uri in list(server.scheduled):
            server.forget(uri)
        server.linter.shutdown(wait=False, cancel_futures=True)

    return server


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
    server.start_io(sys.stdin.buffer, protocol_out)
    return 0 if server.shutdown_requested else 1
