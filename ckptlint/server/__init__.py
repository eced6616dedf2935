"""`ckptlint server`: a language server (LSP over stdio) for editors. Needs the `server`
extra (pygls); importing this package without it raises ModuleNotFoundError for pygls."""

from ckptlint.server.lsp import create_server, serve

__all__ = ["create_server", "serve"]
