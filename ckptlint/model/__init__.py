"""The program model: what the code of a project denotes, built once per project from
per-file facts (cached by content, loaded lazily) and shared by every rule, the index queries
and the recipe checks.

    library      third-party behaviour as data (torch, transformers, peft, accelerate, timm)
    names        module names and imports
    facts        the values one file contributes (`FileFacts`)
    extraction   source text -> `FileFacts`, with CPython's `ast`
    index        `ProjectIndex`: the facts of every file and the questions asked across files
"""
