"""Reading source text, the model's leaf: CPython's `ast` (walking a tree, small call and
target readings, scopes and names, module names and imports, parameter annotations), and the
project's other files (YAML / JSON documents as settings, shell scripts as commands, a command
as a launch, which files the index reads)."""
