"""The program model: what the code of a project denotes, built once per project from
per-file facts (cached by content, loaded lazily) and shared by every rule, the index queries
and the recipe checks. Its layers, leaf first; each imports only from those before it
(`tests/test_structure.py` checks it, `docs/architecture.md` names every module):

    syntax        reading source text: CPython's `ast`, recipe documents, shell scripts
    form          the summary form: expressions, function summaries, abstract values, branches
    library       third-party behaviour as data, one module per library
    file_facts    one file's text to its facts (`FileFacts`)
    project       every file's facts, the call graph, the reach of FSDP uses, the queries
    evaluation    the evaluator (`Denotation`) and what it answers across files
    index, recompute_reads, script_models
                  what the rules ask: `ProjectIndex`, and the questions built on it
"""
