"""A rule folder: the rule in `rule.py`, its cases in `cases/` (see `ckptlint/rule_cases.py`)."""
