"""The rule pack, installed as `ckptlint.rules`: one module per rule, found automatically."""
