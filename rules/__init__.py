"""The rule pack, installed as `ckptlint.rules`: one folder per rule (`<slug>/rule.py` and
its `cases/`), found automatically."""
