"""Severities (DESIGN.md, "Severity"): each rule's own, shown in every format, configurable
per code or prefix (`severity = {CKPT001 = "error"}`), and `--fail-on` / `fail-on` gating
the exit code by severity."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest

from ckptlint.config import ConfigError, Settings, parse_config_table
from ckptlint.registry import all_rules
from ckptlint.rule_codes import ENGINE_CODES, rule_summary
from ckptlint.types import Diagnostic, Location, Severity
from test_cli import MODEL, PYPROJECT


@pytest.fixture
def project(make_project) -> Path:
    # CKPT001 (a warning: an implicit default) on line 3, CKPT032 (an error: the value lands
    # in the wrong parameter) on line 4.
    return make_project({"src/model.py": MODEL}, pyproject=PYPROJECT)


def _severities(cli, project, *flags) -> dict[str, str]:
    result = cli(["src", "--output-format", "json", *flags], cwd=project)
    return {item["code"]: item["severity"] for item in json.loads(result.stdout)}


def test_every_rule_declares_its_own_severity_and_the_manifest_carries_it():
    for rule in all_rules():
        assert "severity" in vars(rule), rule.code
        assert rule_summary(rule.code).severity is rule.severity
    # DESIGN.md's table: warnings for memory, speed or an implicit default.
    warnings = {rule.code for rule in all_rules() if rule.severity is Severity.WARNING}
    assert {"CKPT001", "CKPT004", "CKPT005", "CKPT020"} <= warnings
    assert {"CKPT003", "CKPT010", "CKPT030", "CKPT032"} <= {r.code for r in all_rules() if r.severity is Severity.ERROR}
    assert ENGINE_CODES["CKPT900"].severity is Severity.ERROR
    assert ENGINE_CODES["CKPT100"].severity is Severity.INFO


def test_text_and_json_show_each_findings_severity(cli, project):
    lines = cli(["src", "-q"], cwd=project).stdout.splitlines()
    assert lines[0].startswith("src/model.py:3:9: CKPT001 warning: `checkpoint` without `use_reentrant`")
    assert lines[1].startswith("src/model.py:4:12: CKPT032 [*] error: ")
    assert _severities(cli, project) == {"CKPT001": "warning", "CKPT032": "error"}


def test_configured_severity_most_specific_prefix_wins(cli, project):
    (project / "pyproject.toml").write_text(
        PYPROJECT + '[tool.ckptlint]\nseverity = {CKPT0 = "info", CKPT032 = "warning"}\n'
    )
    assert _severities(cli, project) == {"CKPT001": "info", "CKPT032": "warning"}
    inline = _severities(cli, project, "--config", 'severity = {CKPT001 = "error"}')
    assert inline == {"CKPT001": "error", "CKPT032": "error"}  # inline replaces the file's table


@pytest.mark.parametrize(
    ("flags", "exit_code"),
    [
        ((), 1),  # the default, info: every finding fails the run
        (("--fail-on", "warning"), 1),
        (("--fail-on", "error"), 1),  # CKPT032 is an error
        (("--fail-on", "error", "--ignore", "CKPT032"), 0),  # only the CKPT001 warning is left
        (("--fail-on", "warning", "--ignore", "CKPT032"), 1),
        (("--config", "fail-on = 'error'", "--ignore", "CKPT032"), 0),
        (("--config", 'severity = {CKPT001 = "error"}', "--fail-on", "error", "--ignore", "CKPT032"), 1),
    ],
)
def test_fail_on_gates_the_exit_code_by_severity(cli, project, flags, exit_code):
    result = cli(["src", *flags], cwd=project)
    assert result.exit_code == exit_code, result.stdout + result.stderr
    # Findings below the gate are still reported.
    assert "src/model.py:3:9: CKPT001 " in result.stdout


def test_fail_on_from_the_command_line_wins_over_the_configuration(cli, project):
    (project / "pyproject.toml").write_text(PYPROJECT + "[tool.ckptlint]\nfail-on = 'error'\n")
    assert cli(["src", "--ignore", "CKPT032"], cwd=project).exit_code == 0
    assert cli(["src", "--ignore", "CKPT032", "--fail-on", "warning"], cwd=project).exit_code == 1
    shown = cli(["--show-settings", "src", "--fail-on", "warning"], cwd=project).stdout
    assert "fail-on:           warning\n  from:            " in shown


@pytest.mark.parametrize(
    ("table", "message"),
    [
        ({"severity": {"CKPT001": "fatal"}}, "`severity` [CKPT001] must be one of error, warning, info, got 'fatal'"),
        ({"severity": {"CKPT999": "error"}}, "unknown rule code or prefix 'CKPT999'"),
        ({"severity": "error"}, "`severity` must be a table of rule code or prefix -> severity"),
        ({"fail-on": "warn"}, "`fail-on` must be one of error, warning, info, got 'warn'"),
    ],
)
def test_bad_severity_settings_are_refused_with_the_key(table, message):
    with pytest.raises(ConfigError) as raised:
        parse_config_table(Path("pyproject.toml"), table)
    assert message in str(raised.value)


def test_bad_severity_in_the_configuration_exits_2(cli, project):
    (project / "pyproject.toml").write_text(PYPROJECT + '[tool.ckptlint]\nseverity = {CKPT001 = "fatal"}\n')
    result = cli(["src"], cwd=project)
    assert result.exit_code == 2
    assert "must be one of error, warning, info" in result.stderr


@pytest.mark.parametrize(
    ("output_format", "expected"),
    [
        ("sarif", lambda out: [r["level"] for r in json.loads(out)["runs"][0]["results"]] == ["warning", "error"]),
        ("github", lambda out: [line.split(" ", 1)[0] for line in out.splitlines()] == ["::warning", "::error"]),
        ("gitlab", lambda out: [i["severity"] for i in json.loads(out)] == ["minor", "major"]),
        ("rdjson", lambda out: [d["severity"] for d in json.loads(out)["diagnostics"]] == ["WARNING", "ERROR"]),
        ("json-lines", lambda out: [json.loads(line)["severity"] for line in out.splitlines()] == ["warning", "error"]),
        ("junit", lambda out: 'type="warning"' in out and 'type="error"' in out),
        ("full", lambda out: "CKPT001 warning: " in out and "CKPT032 [*] error: " in out),
    ],
)
def test_every_format_carries_the_severity(cli, project, output_format, expected):
    out = cli(["src", "--output-format", output_format], cwd=project).stdout
    assert expected(out), out


def test_sarif_rule_descriptors_default_to_the_rules_severity(cli, project):
    log = json.loads(cli(["src", "--output-format", "sarif"], cwd=project).stdout)
    levels = {r["id"]: r["defaultConfiguration"]["level"] for r in log["runs"][0]["tool"]["driver"]["rules"]}
    assert (levels["CKPT001"], levels["CKPT032"], levels["CKPT100"]) == ("warning", "error", "note")


def test_settings_apply_severities_without_touching_other_fields():
    settings = dataclasses.replace(
        Settings.default(Path(".")), severities=(("CKPT0", Severity.INFO), ("CKPT03", Severity.WARNING))
    )
    found = Diagnostic("CKPT032", "m", "a.py", Location(1, 1), Location(1, 2), severity=Severity.ERROR)
    other = Diagnostic("CKPT001", "m", "a.py", Location(2, 1), Location(2, 2), severity=Severity.WARNING)
    engine = Diagnostic("CKPT900", "m", "a.py", Location(1, 1), Location(1, 1))
    assert [d.severity for d in settings.with_severities([found, other, engine])] == [
        Severity.WARNING, Severity.INFO, Severity.ERROR,
    ]
    assert settings.with_severities([found])[0].message == "m"
