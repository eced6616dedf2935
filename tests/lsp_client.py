"""A small LSP client for the tests: JSON-RPC with Content-Length framing over the stdio of
a real `ckptlint server` process. Tests wait for the messages they expect (a generous
timeout only guards against a hang); nothing here measures time."""

from __future__ import annotations

import json
import os
import queue
import subprocess
import sys
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

# Only a guard against a server that never answers: a healthy one answers in well under
# a second, but a loaded 2-core machine importing libcst can take several.
SAFETY_TIMEOUT = 120.0


class LspClient:
    def __init__(self, cwd: Path, command: list[str] | None = None, env: dict[str, str] | None = None) -> None:
        self.process = subprocess.Popen(
            command or [sys.executable, "-m", "ckptlint", "server"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            cwd=cwd,
            env={**os.environ, **(env or {})},
        )
        self._incoming: queue.Queue[dict | None] = queue.Queue()
        self._unclaimed: list[dict] = []
        self.seen: list[dict] = []  # every message, for failure reports
        self._next_id = 0
        self._write_lock = threading.Lock()
        self._stderr: list[bytes] = []
        threading.Thread(target=self._read, daemon=True).start()
        threading.Thread(target=lambda: self._stderr.extend(self.process.stderr), daemon=True).start()

    # --- framing ---------------------------------------------------------------------

    def _write(self, payload: dict) -> None:
        body = json.dumps(payload).encode("utf-8")
        with self._write_lock:
            self.process.stdin.write(b"Content-Length: %d\r\n\r\n" % len(body) + body)
            self.process.stdin.flush()

    def _read(self) -> None:
        stream = self.process.stdout
        while True:
            length = None
            while True:
                header = stream.readline()
                if not header:
                    self._incoming.put(None)
                    return
                if header in (b"\r\n", b"\n"):
                    break
                name, _, value = header.decode("ascii").partition(":")
                if name.strip().lower() == "content-length":
                    length = int(value)
            message = json.loads(stream.read(length).decode("utf-8"))
            if "method" in message and "id" in message:  # a request from the server
                self._write({"jsonrpc": "2.0", "id": message["id"], "result": None})
            self._incoming.put(message)

    # --- messages ----------------------------------------------------------------------

    def notify(self, method: str, params: Any = None) -> None:
        self._write({"jsonrpc": "2.0", "method": method, "params": params})

    def send_request(self, method: str, params: Any = None) -> int:
        self._next_id += 1
        self._write({"jsonrpc": "2.0", "id": self._next_id, "method": method, "params": params})
        return self._next_id

    def request(self, method: str, params: Any = None) -> dict:
        """The whole response message (`result` or `error`)."""
        request_id = self.send_request(method, params)
        return self.wait_for(lambda m: m.get("id") == request_id and "method" not in m, f"the response to {method}")

    def wait_for(self, matches: Callable[[dict], bool], what: str) -> dict:
        """The first message, received or yet to come, that `matches`; the others stay
        for later waits."""
        for index, message in enumerate(self._unclaimed):
            if matches(message):
                return self._unclaimed.pop(index)
        while True:
            try:
                message = self._incoming.get(timeout=SAFETY_TIMEOUT)
            except queue.Empty:
                raise AssertionError(f"no {what} from the server; messages: {self.seen}; stderr: {self.stderr()}") from None
            if message is None:
                raise AssertionError(f"the server closed its output before {what}; stderr: {self.stderr()}")
            self.seen.append(message)
            if matches(message):
                return message
            self._unclaimed.append(message)

    def diagnostics(self, uri: str, matches: Callable[[list[dict]], bool] = lambda _: True, version: int | None = None) -> list[dict]:
        """The next diagnostics published for `uri` (of `version`, when given) that `matches`."""
        return self.wait_for(
            lambda m: m.get("method") == "textDocument/publishDiagnostics"
            and m["params"]["uri"] == uri
            and (version is None or m["params"].get("version") == version)
            and matches(m["params"]["diagnostics"]),
            f"diagnostics for {uri}" + (f" version {version}" if version is not None else ""),
        )["params"]["diagnostics"]

    def stderr(self) -> str:
        return b"".join(self._stderr).decode("utf-8", "replace")[-4000:]

    # --- the session -------------------------------------------------------------------

    def initialize(
        self, root: Path, options: Any = None, encodings: tuple[str, ...] = ("utf-16",), capabilities: dict | None = None
    ) -> dict:
        response = self.request(
            "initialize",
            {
                "processId": os.getpid(),
                "rootUri": root.as_uri(),
                "capabilities": {"general": {"positionEncodings": list(encodings)}, **(capabilities or {})},
                "initializationOptions": options,
            },
        )
        self.notify("initialized", {})
        return response

    def open(self, path: Path, text: str, version: int = 1, language: str = "python") -> str:
        uri = path.as_uri()
        self.notify("textDocument/didOpen", {"textDocument": {"uri": uri, "languageId": language, "version": version, "text": text}})
        return uri

    def change(self, uri: str, text: str, version: int) -> None:
        self.notify("textDocument/didChange", {"textDocument": {"uri": uri, "version": version}, "contentChanges": [{"text": text}]})

    def close_document(self, uri: str) -> None:
        self.notify("textDocument/didClose", {"textDocument": {"uri": uri}})

    def open_notebook(self, path: Path, cells: list[tuple[str, str]], version: int = 1) -> list[str]:
        """Open a notebook of `cells` ((kind "code" or "markdown", text) pairs) through
        notebook synchronisation; the cells' URIs."""
        uri = path.as_uri()
        uris = [f"vscode-notebook-cell:{path}#cell{number}" for number in range(len(cells))]
        self.notify(
            "notebookDocument/didOpen",
            {
                "notebookDocument": {
                    "uri": uri, "notebookType": "jupyter-notebook", "version": version,
                    "cells": [{"kind": 2 if kind == "code" else 1, "document": cell} for (kind, _), cell in zip(cells, uris)],
                },
                "cellTextDocuments": [
                    {"uri": cell, "languageId": "python" if kind == "code" else "markdown", "version": 1, "text": text}
                    for (kind, text), cell in zip(cells, uris)
                ],
            },
        )
        return uris

    def change_cell(self, notebook: Path, version: int, cell_uri: str, text: str, cell_version: int) -> None:
        self.notify(
            "notebookDocument/didChange",
            {
                "notebookDocument": {"uri": notebook.as_uri(), "version": version},
                "change": {"cells": {"textContent": [
                    {"document": {"uri": cell_uri, "version": cell_version}, "changes": [{"text": text}]}
                ]}},
            },
        )

    def code_actions(self, uri: str, start: dict, end: dict, diagnostics: list[dict], only: list[str] | None = None) -> dict:
        context: dict[str, Any] = {"diagnostics": diagnostics}
        if only is not None:
            context["only"] = only
        return self.request(
            "textDocument/codeAction", {"textDocument": {"uri": uri}, "range": {"start": start, "end": end}, "context": context}
        )

    def stop(self) -> int:
        """`shutdown` then `exit`; the process's exit status."""
        assert "error" not in self.request("shutdown")
        self.notify("exit")
        return self.wait()

    def wait(self) -> int:
        try:
            return self.process.wait(timeout=SAFETY_TIMEOUT)
        finally:
            self.close()

    def close(self) -> None:
        if self.process.poll() is None:
            self.process.kill()
            self.process.wait()
        for stream in (self.process.stdin, self.process.stdout, self.process.stderr):
            try:
                stream.close()
            except OSError:
                pass


def apply_edits(text: str, edits: list[dict]) -> str:
    """`text` with LSP TextEdits applied (positions in UTF-16 code units of the original)."""

    def offset(position: dict) -> int:
        lines = text.splitlines(keepends=True)
        start = sum(len(line) for line in lines[: position["line"]])
        line = (lines[position["line"]] if position["line"] < len(lines) else "").rstrip("\r\n")
        units = 0
        for index, character in enumerate(line):
            if units >= position["character"]:
                return start + index
            units += 2 if ord(character) > 0xFFFF else 1
        return start + len(line)

    for edit in sorted(edits, key=lambda e: (e["range"]["start"]["line"], e["range"]["start"]["character"]), reverse=True):
        start, end = offset(edit["range"]["start"]), offset(edit["range"]["end"])
        text = text[:start] + edit["newText"] + text[end:]
    return text
