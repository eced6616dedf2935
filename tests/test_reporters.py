"""The reporters: JSON (DESIGN.md's schema), SARIF 2.1.0, GitHub annotations, JUnit XML and
the text summary, through the command line and on hand-built diagnostics."""

from __future__ import annotations

import json
import re
import xml.etree.ElementTree as ET
from pathlib import Path

import click
import pytest

from ckptlint import __version__
from ckptlint.rule_codes import all_codes, rule_summary
from ckptlint.reporters import github, json_format, junit, sarif, text
from ckptlint.types import AppliedFix, Applicability, Diagnostic, Edit, FileResult, Fix, Location, Severity

PYPROJECT = "[project]\nname = 'demo'\ndependencies = ['torch>=2.1']\n"

# Every import form, a multi-line call, a partial, and non-ASCII text before a call (columns
# count characters).
MODEL = """\
import functools
import torch
import torch.utils.checkpoint as cp
from torch.utils.checkpoint import checkpoint as ck

ckpt = functools.partial(torch.utils.checkpoint.checkpoint, preserve_rng_state=True)


class Block:
    def forward(self, h, mask):
        note = "héllo ✓"; h = ck(self.attn, h)
        h = cp.checkpoint(self.mlp, h, attention_mask=mask)
        h = torch.utils.checkpoint.checkpoint(
            self.norm,
            h,  # keep this comment
        )
        h = cp.checkpoint_sequential(self.layers, 2, h)
        return ckpt(self.out, h)
"""
BROKEN = "def f(:\n    pass\n"

# (code, row, column, end row, end column, applicability of the fix or None)
EXPECTED = [
    ("CKPT900", 1, 7, 1, 7, None),
    ("CKPT001", 6, 8, 6, 85, "unsafe"),
    ("CKPT001", 11, 31, 11, 47, "unsafe"),
    ("CKPT032", 12, 13, 12, 60, "safe"),
    ("CKPT001", 13, 13, 16, 10, "unsafe"),
    ("CKPT001", 17, 13, 17, 56, "unsafe"),
]
URL = "https://github.com/ckptlint/ckptlint/blob/main/docs/rules/{}.md"


@pytest.fixture
def project(make_project) -> Path:
    return make_project({"src/a_broken.py": BROKEN, "src/model.py": MODEL}, pyproject=PYPROJECT)


def run_format(cli, root: Path, output_format: str, *extra: str):
    result = cli(["--output-format", output_format, *extra, "src"], cwd=root)
    assert result.stderr == ""
    return result


# --- JSON -------------------------------------------------------------------------------


def test_json_schema(cli, project):
    result = run_format(cli, project, "json")
    assert result.exit_code == 1
    items = json.loads(result.stdout)
    assert isinstance(items, list)
    for item in items:
        assert list(item) == [
            "code", "message", "filename", "location", "end_location", "fix", "url", "noqa_row", "cell", "severity"
        ]
        assert set(item["location"]) == set(item["end_location"]) == {"row", "column"}
        assert all(type(v) is int and v >= 1 for v in (*item["location"].values(), *item["end_location"].values()))
        assert item["url"] == URL.format(item["code"])
        if item["fix"] is not None:
            assert list(item["fix"]) == ["applicability", "message", "edits"]
            for edit in item["fix"]["edits"]:
                assert list(edit) == ["content", "location", "end_location"]
    model = str(project / "src" / "model.py")
    assert [
        (
            i["code"], i["location"]["row"], i["location"]["column"], i["end_location"]["row"],
            i["end_location"]["column"], i["fix"] and i["fix"]["applicability"],
        )
        for i in items
    ] == EXPECTED
    assert [i["filename"] for i in items] == [str(project / "src" / "a_broken.py")] + [model] * 5
    assert all(Path(i["filename"]).is_absolute() for i in items)
    assert [i["noqa_row"] for i in items] == [None, 6, 11, 12, 13, 17]
    assert items[0]["message"] == "SyntaxError: invalid syntax"
    assert items[0]["fix"] is None
    assert items[3]["fix"] == {
        "applicability": "safe",
        "message": "Set `use_reentrant=False`",
        "edits": [
            {"content": ", use_reentrant=False", "location": {"row": 12, "column": 59},
             "end_location": {"row": 12, "column": 59}}
        ],
    }
    assert items[1]["fix"]["message"] == "Add `use_reentrant=False`"


def test_json_without_findings_is_an_empty_list(cli, make_project):
    root = make_project({"src/ok.py": "x = 1\n"}, pyproject=PYPROJECT)
    result = run_format(cli, root, "json")
    assert (result.exit_code, result.stdout) == (0, "[]\n")


def test_json_has_no_text_summary(cli, project):
    result = run_format(cli, project, "json", "--show-fixes", "--fix")
    json.loads(result.stdout)  # nothing else on stdout


_LINE_BREAK = re.compile(r"\r\n|\r|\n")


def _offset(text: str, row: int, column: int) -> int:
    starts = [0] + [m.end() for m in _LINE_BREAK.finditer(text)]
    return starts[row - 1] + column - 1


def apply_edits(text: str, edits: list[tuple[int, int, int, int, str]]) -> str:
    """Apply (row, column, end row, end column, content) edits, 1-based, end exclusive."""
    spans = sorted((_offset(text, r, c), _offset(text, er, ec), content) for r, c, er, ec, content in edits)
    for (_, end, _), (start, _, _) in zip(spans, spans[1:]):
        assert end <= start, "edits overlap"
    for start, end, content in reversed(spans):
        text = text[:start] + content + text[end:]
    return text


def test_json_edits_reproduce_the_unsafe_fix_result(cli, project):
    items = json.loads(run_format(cli, project, "json").stdout)
    edits = [
        (e["location"]["row"], e["location"]["column"], e["end_location"]["row"], e["end_location"]["column"], e["content"])
        for item in items if item["fix"] for e in item["fix"]["edits"]
    ]
    expected = apply_edits(MODEL, edits)
    fixed = cli(["--fix", "--unsafe-fixes", "src/model.py"], cwd=project)
    assert fixed.exit_code == 0
    assert (project / "src" / "model.py").read_text(encoding="utf-8") == expected
    # And what that is, concretely: a keyword added to each call, comments and layout kept.
    assert expected.splitlines()[5] == (
        "ckpt = functools.partial(torch.utils.checkpoint.checkpoint, preserve_rng_state=True, use_reentrant=False)"
    )
    assert expected.splitlines()[10] == '        note = "héllo ✓"; h = ck(self.attn, h, use_reentrant=False)'
    assert expected.splitlines()[12:17] == [
        "        h = torch.utils.checkpoint.checkpoint(",
        "            self.norm,",
        "            h,  # keep this comment",
        "            use_reentrant=False,",
        "        )",
    ]


def test_json_after_fix_lists_what_remains(cli, project):
    result = run_format(cli, project, "json", "--fix")
    assert [(i["code"], i["location"]["row"]) for i in json.loads(result.stdout)] == [
        ("CKPT900", 1), ("CKPT001", 6), ("CKPT001", 11), ("CKPT001", 13), ("CKPT001", 17)
    ]
    assert result.exit_code == 1


def test_json_of_hand_built_diagnostics():
    diagnostic = Diagnostic(
        code="CKPT001",
        message="ünïcode \"quoted\"",
        path="pkg/m.py",
        location=Location(2, 3),
        end_location=Location(4, 1),
        fix=Fix(Applicability.UNSAFE, "Add it", (Edit(Location(4, 1), Location(4, 1), "x"),)),
        noqa_row=2,
        url="u",
    )
    rendered = json_format.render([diagnostic])
    assert "ünïcode" in rendered  # not \u-escaped
    assert json.loads(rendered)[0]["filename"] == str(Path("pkg/m.py").absolute())
    assert json.loads(json_format.render([diagnostic.__class__(**{**diagnostic.__dict__, "path": "-"})]))[0]["filename"] == "-"


# --- SARIF ------------------------------------------------------------------------------

SARIF_LEVELS = {"none", "note", "warning", "error"}


class SarifError(AssertionError):
    pass


def _require(condition: bool, message: str) -> None:
    if not condition:
        raise SarifError(message)


def _is_int(value) -> bool:
    return type(value) is int


def _check_message(value, where: str) -> None:
    _require(isinstance(value, dict) and isinstance(value.get("text"), str) and value["text"], f"{where}: message needs text")


def _check_region(region, where: str) -> None:
    _require(isinstance(region, dict), f"{where}: region must be an object")
    _require(_is_int(region.get("startLine")) and region["startLine"] >= 1, f"{where}: startLine >= 1")
    start_column = region.get("startColumn", 1)
    _require(_is_int(start_column) and start_column >= 1, f"{where}: startColumn >= 1")
    end_line = region.get("endLine", region["startLine"])
    _require(_is_int(end_line) and end_line >= region["startLine"], f"{where}: endLine >= startLine")
    if "endColumn" in region:
        _require(_is_int(region["endColumn"]) and region["endColumn"] >= 1, f"{where}: endColumn >= 1")
        if end_line == region["startLine"]:
            _require(region["endColumn"] >= start_column, f"{where}: endColumn >= startColumn on one line")


def _check_artifact_location(location, where: str) -> None:
    _require(isinstance(location, dict) and isinstance(location.get("uri"), str) and location["uri"], f"{where}: uri")


def validate_sarif(log) -> None:
    """The parts of the SARIF 2.1.0 schema a consumer (GitHub code scanning) relies on."""
    _require(isinstance(log, dict), "log must be an object")
    _require(log.get("version") == "2.1.0", "version must be 2.1.0")
    _require(isinstance(log.get("$schema"), str) and "sarif" in log["$schema"] and "2.1.0" in log["$schema"], "$schema")
    _require(isinstance(log.get("runs"), list) and log["runs"], "runs must be a non-empty array")
    for r, run in enumerate(log["runs"]):
        driver = run.get("tool", {}).get("driver")
        _require(isinstance(driver, dict), f"runs[{r}].tool.driver is required")
        _require(isinstance(driver.get("name"), str) and driver["name"], "driver.name is required")
        rules = driver.get("rules", [])
        _require(isinstance(rules, list), "driver.rules must be an array")
        ids = [rule.get("id") for rule in rules]
        _require(all(isinstance(i, str) and i for i in ids), "every rule needs an id")
        _require(len(set(ids)) == len(ids), "rule ids must be unique")
        for rule in rules:
            for key in ("shortDescription", "fullDescription", "help"):
                if key in rule:
                    _check_message(rule[key], f"rule {rule['id']}.{key}")
        results = run.get("results")
        _require(isinstance(results, list), f"runs[{r}].results must be an array")
        for i, result in enumerate(results):
            where = f"results[{i}]"
            _check_message(result.get("message"), where)
            _require(isinstance(result.get("ruleId"), str), f"{where}.ruleId")
            if "ruleIndex" in result:
                index = result["ruleIndex"]
                _require(_is_int(index) and 0 <= index < len(rules), f"{where}.ruleIndex out of range")
                _require(rules[index]["id"] == result["ruleId"], f"{where}.ruleIndex names another rule")
            if "level" in result:
                _require(result["level"] in SARIF_LEVELS, f"{where}.level")
            locations = result.get("locations", [])
            _require(isinstance(locations, list), f"{where}.locations")
            for location in locations:
                physical = location.get("physicalLocation")
                _require(isinstance(physical, dict), f"{where}: physicalLocation")
                _check_artifact_location(physical.get("artifactLocation"), where)
                _check_region(physical.get("region"), where)
            for f, fix in enumerate(result.get("fixes", [])):
                fwhere = f"{where}.fixes[{f}]"
                if "description" in fix:
                    _check_message(fix["description"], fwhere)
                changes = fix.get("artifactChanges")
                _require(isinstance(changes, list) and changes, f"{fwhere}.artifactChanges is required")
                for change in changes:
                    _check_artifact_location(change.get("artifactLocation"), fwhere)
                    replacements = change.get("replacements")
                    _require(isinstance(replacements, list) and replacements, f"{fwhere}: replacements required")
                    for replacement in replacements:
                        _check_region(replacement.get("deletedRegion"), f"{fwhere}.deletedRegion")
                        if "insertedContent" in replacement:
                            _require(isinstance(replacement["insertedContent"].get("text"), str), f"{fwhere}: insertedContent.text")


def test_sarif_is_valid_and_complete(cli, project):
    result = run_format(cli, project, "sarif")
    assert result.exit_code == 1
    log = json.loads(result.stdout)
    validate_sarif(log)
    assert log["$schema"] == "https://json.schemastore.org/sarif-2.1.0.json"
    run = log["runs"][0]
    driver = run["tool"]["driver"]
    assert (driver["name"], driver["version"]) == ("ckptlint", __version__)
    assert [rule["id"] for rule in driver["rules"]] == sorted(all_codes())
    assert driver["rules"][0]["name"] == "checkpoint-implicit-reentrant"
    assert driver["rules"][0]["helpUri"] == URL.format("CKPT001")
    assert run["columnKind"] == "unicodeCodePoints"

    rows = []
    for result_ in run["results"]:
        (location,) = result_["locations"]
        region = location["physicalLocation"]["region"]
        fixes = result_.get("fixes")
        rows.append(
            (
                result_["ruleId"], region["startLine"], region["startColumn"], region["endLine"], region["endColumn"],
                None if fixes is None else fixes[0]["description"]["text"].rsplit("(", 1)[1].rstrip(")"),
            )
        )
        assert driver["rules"][result_["ruleIndex"]]["id"] == result_["ruleId"]
        assert result_["level"] == {"CKPT001": "warning"}.get(result_["ruleId"], "error")
    assert rows == EXPECTED
    uris = [r["locations"][0]["physicalLocation"]["artifactLocation"]["uri"] for r in run["results"]]
    assert uris == ["src/a_broken.py"] + ["src/model.py"] * 5
    assert run["results"][3]["fixes"] == [
        {
            "description": {"text": "Set `use_reentrant=False` (safe)"},
            "artifactChanges": [
                {
                    "artifactLocation": {"uri": "src/model.py"},
                    "replacements": [
                        {
                            "deletedRegion": {"startLine": 12, "startColumn": 59, "endLine": 12, "endColumn": 59},
                            "insertedContent": {"text": ", use_reentrant=False"},
                        }
                    ],
                }
            ],
        }
    ]

    # The replacements, applied, are the --fix --unsafe-fixes result.
    edits = [
        (d["startLine"], d["startColumn"], d["endLine"], d["endColumn"], rep["insertedContent"]["text"])
        for r in run["results"] for fix in r.get("fixes", []) for change in fix["artifactChanges"]
        for rep in change["replacements"] for d in [rep["deletedRegion"]]
    ]
    expected = apply_edits(MODEL, edits)
    assert cli(["--fix", "--unsafe-fixes", "src/model.py"], cwd=project).exit_code == 0
    assert (project / "src" / "model.py").read_text(encoding="utf-8") == expected


def test_sarif_without_findings(cli, make_project):
    root = make_project({"src/ok.py": "x = 1\n"}, pyproject=PYPROJECT)
    result = run_format(cli, root, "sarif")
    assert result.exit_code == 0
    log = json.loads(result.stdout)
    validate_sarif(log)
    assert log["runs"][0]["results"] == []


def test_sarif_uri_outside_the_working_directory_is_a_file_uri(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    outside = (tmp_path.parent / "elsewhere dir" / "m.py").resolve()
    diagnostic = Diagnostic("CKPT001", "m", str(outside), Location(1, 1), Location(1, 2))
    log = json.loads(sarif.render([diagnostic]))
    validate_sarif(log)
    uri = log["runs"][0]["results"][0]["locations"][0]["physicalLocation"]["artifactLocation"]["uri"]
    assert uri == outside.as_uri()
    assert " " not in uri


@pytest.mark.parametrize(
    ("mutate", "complaint"),
    [
        (lambda log: log.update(version="2.0.0"), "version"),
        (lambda log: log["runs"][0]["results"][0].update(ruleIndex=2), "ruleIndex names another rule"),
        (lambda log: log["runs"][0]["results"][0].update(ruleIndex=99), "ruleIndex out of range"),
        (lambda log: log["runs"][0]["results"][0]["locations"][0]["physicalLocation"]["region"].update(startLine=0), "startLine"),
        (lambda log: log["runs"][0]["results"][0]["fixes"][0].pop("artifactChanges"), "artifactChanges"),
        (lambda log: log["runs"][0]["results"][0]["fixes"][0]["artifactChanges"][0]["replacements"][0].pop("deletedRegion"), "region must be an object"),
        (lambda log: log["runs"][0]["tool"]["driver"]["rules"].append({"id": "CKPT001"}), "unique"),
        (lambda log: log["runs"][0]["results"][0].update(level="fatal"), "level"),
    ],
)
def test_the_sarif_validator_rejects_broken_logs(mutate, complaint):
    diagnostic = Diagnostic(
        "CKPT032", "m", "m.py", Location(1, 5), Location(1, 9),
        fix=Fix(Applicability.SAFE, "fix", (Edit(Location(1, 8), Location(1, 8), ", a=1"),)),
    )
    log = json.loads(sarif.render([diagnostic]))
    validate_sarif(log)
    mutate(log)
    with pytest.raises(SarifError, match=complaint):
        validate_sarif(log)


# --- GitHub -----------------------------------------------------------------------------


def test_github_annotations(cli, project):
    result = run_format(cli, project, "github")
    assert result.exit_code == 1
    lines = result.stdout.splitlines()
    assert lines[0] == (
        "::error title=ckptlint (CKPT900),file=src/a_broken.py,line=1,col=7,endLine=1,endColumn=7"
        "::CKPT900 SyntaxError: invalid syntax"
    )
    assert lines[4] == (
        "::warning title=ckptlint (CKPT001),file=src/model.py,line=13,col=13,endLine=16,endColumn=10"
        "::CKPT001 `checkpoint` without `use_reentrant`: torch falls back to the reentrant "
        "implementation and its warning cannot point at this line; pass `use_reentrant=False`"
    )
    pattern = re.compile(
        r"::(?P<command>error|warning) title=ckptlint \((?P<code>CKPT\d{3})\),file=src/(a_broken|model)\.py,line=(?P<line>\d+),"
        r"col=(?P<col>\d+),endLine=(?P<end_line>\d+),endColumn=(?P<end_col>\d+)::(?P=code) .+"
    )
    parsed = []
    for line in lines:
        match = pattern.fullmatch(line)
        assert match, line
        assert match["command"] == ("warning" if match["code"] == "CKPT001" else "error")
        parsed.append((match["code"], int(match["line"]), int(match["col"]), int(match["end_line"]), int(match["end_col"])))
    assert parsed == [row[:5] for row in EXPECTED]


def test_github_escapes_properties_and_data():
    diagnostic = Diagnostic(
        code="CKPT001",
        message="100% sure,\r\nsecond line: yes",
        path="we:ird,dir%/m.py",
        location=Location(3, 9),
        end_location=Location(5, 2),
    )
    assert github.render([diagnostic]) == (
        "::error title=ckptlint (CKPT001),file=we%3Aird%2Cdir%25/m.py,line=3,col=9,endLine=5,endColumn=2"
        "::CKPT001 100%25 sure,%0D%0Asecond line: yes\n"
    )
    assert github.render([]) == ""


def test_github_has_no_text_summary(cli, make_project):
    root = make_project({"src/ok.py": "x = 1\n"}, pyproject=PYPROJECT)
    result = run_format(cli, root, "github")
    assert (result.exit_code, result.stdout) == (0, "")


# --- JUnit ------------------------------------------------------------------------------


def test_junit(cli, project):
    result = run_format(cli, project, "junit")
    assert result.exit_code == 1
    assert result.stdout.startswith('<?xml version="1.0" encoding="UTF-8"?>\n')
    root = ET.fromstring(result.stdout.encode("utf-8"))
    assert root.tag == "testsuites"
    assert (root.get("tests"), root.get("failures"), root.get("errors")) == ("6", "6", "0")
    suites = root.findall("testsuite")
    assert [(s.get("name"), s.get("tests"), s.get("failures")) for s in suites] == [
        ("src/a_broken.py", "1", "1"),
        ("src/model.py", "5", "5"),
    ]
    cases = [case for suite in suites for case in suite.findall("testcase")]
    assert [(c.get("name"), c.get("file"), c.get("line")) for c in cases] == [
        (f"org.ckptlint.{code}", "src/a_broken.py" if code == "CKPT900" else "src/model.py", str(row))
        for code, row, *_ in EXPECTED
    ]
    failure = cases[3].find("failure")
    assert failure.get("message").startswith("CKPT032 keyword argument `attention_mask`")
    assert failure.text.startswith("line 12, col 13, CKPT032 keyword argument `attention_mask`")


def test_junit_without_findings_has_one_passing_case(cli, make_project):
    root = make_project({"src/ok.py": "x = 1\n"}, pyproject=PYPROJECT)
    result = run_format(cli, root, "junit")
    assert result.exit_code == 0
    root_element = ET.fromstring(result.stdout.encode())
    assert (root_element.get("tests"), root_element.get("failures")) == ("1", "0")
    (case,) = root_element.iter("testcase")
    assert case.get("name") == "No errors found"
    assert case.find("failure") is None


def test_junit_escapes_markup():
    diagnostic = Diagnostic("CKPT001", 'a <b> & "c" \'d\'', "x&y.py", Location(1, 1), Location(1, 2))
    root = ET.fromstring(junit.render([diagnostic]).encode())
    (case,) = root.iter("testcase")
    assert case.get("classname") == "x&y.py"
    assert case.find("failure").get("message") == 'CKPT001 a <b> & "c" \'d\''


# --- text -------------------------------------------------------------------------------


def _diagnostic(code: str, applicability: Applicability | None, row: int = 1, path: str = "m.py") -> Diagnostic:
    fix = None if applicability is None else Fix(applicability, "f", (Edit(Location(row, 1), Location(row, 1), "x"),))
    severity = rule_summary(code).severity if rule_summary(code) else Severity.ERROR
    return Diagnostic(code, "msg", path, Location(row, 1), Location(row, 2), fix=fix, severity=severity)


SAFE, UNSAFE, NONE = (_diagnostic("CKPT032", Applicability.SAFE), _diagnostic("CKPT001", Applicability.UNSAFE),
                      _diagnostic("CKPT900", None))


@pytest.mark.parametrize(
    ("diagnostics", "fixed", "flags", "expected"),
    [
        ([], 0, {}, ["All checks passed!"]),
        ([SAFE], 0, {}, ["Found 1 error.", "[*] 1 fixable with the `--fix` option."]),
        ([UNSAFE, UNSAFE], 0, {}, ["Found 2 warnings.", "(2 hidden fixes can be enabled with the `--unsafe-fixes` option.)"]),
        ([UNSAFE], 0, {"unsafe_fixes": True}, ["Found 1 warning.", "[*] 1 fixable with the `--fix` option."]),
        ([NONE], 0, {}, ["Found 1 error."]),
        ([], 3, {"fix_mode": True}, ["Found 3 errors (3 fixed, 0 remaining)."]),
        ([UNSAFE, NONE], 2, {"fix_mode": True},
         ["Found 4 findings (2 fixed, 2 remaining: 1 error, 1 warning).", "(1 hidden fix can be enabled with the `--unsafe-fixes` option.)"]),
        ([UNSAFE], 0, {"fix_mode": True}, ["Found 1 warning.", "(1 hidden fix can be enabled with the `--unsafe-fixes` option.)"]),
        ([], 2, {"diff_mode": True}, ["Would fix 2 errors."]),
        ([UNSAFE], 1, {"diff_mode": True},
         ["Would fix 1 error.", "(1 hidden fix can be enabled with the `--unsafe-fixes` option.)"]),
        ([], 0, {"diff_mode": True}, ["No errors would be fixed."]),
        ([NONE, NONE], 0, {"diff_mode": True}, ["No errors would be fixed (2 not fixable)."]),
    ],
)
def test_summary(diagnostics, fixed, flags, expected):
    options = {"unsafe_fixes": False, "fix_mode": False, "diff_mode": False, **flags}
    assert text.summarize(diagnostics, fixed, **options).render() == "".join(line + "\n" for line in expected)


def test_render_diagnostics_marks_fixable_ones():
    # Styled here; click.echo strips the styles when the output is not a terminal.
    rendered = click.unstyle(text.render_diagnostics([UNSAFE, SAFE, NONE], unsafe_fixes=False))
    assert rendered == "m.py:1:1: CKPT001 warning: msg\nm.py:1:1: CKPT032 [*] error: msg\nm.py:1:1: CKPT900 error: msg\n"
    assert click.unstyle(text.render_diagnostics([UNSAFE], unsafe_fixes=True)) == "m.py:1:1: CKPT001 [*] warning: msg\n"


def test_render_statistics():
    diagnostics = [UNSAFE, UNSAFE, SAFE, NONE, NONE, NONE]
    # [*] fixable as the options stand, [-] only with --unsafe-fixes, blank: no fix.
    assert text.render_statistics(diagnostics, unsafe_fixes=False, as_json=False) == (
        "3\tCKPT900\t    parse-error\n"
        "2\tCKPT001\t[-] checkpoint-implicit-reentrant\n"
        "1\tCKPT032\t[*] kwargs-to-reentrant-checkpoint\n"
    )
    assert text.render_statistics(diagnostics, unsafe_fixes=True, as_json=False) == (
        "3\tCKPT900\t    parse-error\n"
        "2\tCKPT001\t[*] checkpoint-implicit-reentrant\n"
        "1\tCKPT032\t[*] kwargs-to-reentrant-checkpoint\n"
    )
    # As in Ruff, no marker column when no code has a fix.
    assert text.render_statistics([NONE, NONE], unsafe_fixes=False, as_json=False) == "2\tCKPT900\tparse-error\n"
    assert text.render_statistics([UNSAFE], unsafe_fixes=False, as_json=False) == "1\tCKPT001\t[-] checkpoint-implicit-reentrant\n"
    assert text.render_statistics([], unsafe_fixes=False, as_json=False) == ""
    assert json.loads(text.render_statistics(diagnostics, unsafe_fixes=True, as_json=True)) == [
        {"code": "CKPT900", "name": "parse-error", "count": 3, "fixable": False},
        {"code": "CKPT001", "name": "checkpoint-implicit-reentrant", "count": 2, "fixable": True},
        {"code": "CKPT032", "name": "kwargs-to-reentrant-checkpoint", "count": 1, "fixable": True},
    ]


def test_render_applied_fixes():
    files = [
        FileResult("b.py", applied_fixes=(AppliedFix("CKPT032", "m", 3), AppliedFix("CKPT001", "m", 4), AppliedFix("CKPT032", "m", 9))),
        FileResult("c.py"),
    ]
    assert text.render_applied_fixes(files, diff_mode=False) == (
        "Fixed 3 errors:\n- b.py:\n    1 × CKPT001 (checkpoint-implicit-reentrant)\n    2 × CKPT032 (kwargs-to-reentrant-checkpoint)\n"
    )
    assert text.render_applied_fixes(files, diff_mode=True).startswith("Would fix 3 errors:\n")
    assert text.render_applied_fixes([FileResult("c.py")], diff_mode=False) == ""


# --- full, json-lines, gitlab, rdjson; paths from a subdirectory --------------------------

from test_cli import MODEL as SMALL_MODEL  # noqa: E402  (two findings, one safe fix, one unsafe)

FULL = """\
CKPT001 warning: `checkpoint` without `use_reentrant`: torch falls back to the reentrant implementation and its warning cannot point at this line; pass `use_reentrant=False`
 --> src/model.py:3:9
  |
1 | from torch.utils.checkpoint import checkpoint
2 | def forward(self, h, mask):
3 |     h = checkpoint(self.layer, h)
  |         ^^^^^^^^^^^^^^^^^^^^^^^^^
4 |     return checkpoint(self.layer, h, attention_mask=mask)
  |
help: Add `use_reentrant=False`
  |
2 | def forward(self, h, mask):
  -     h = checkpoint(self.layer, h)
3 +     h = checkpoint(self.layer, h, use_reentrant=False)
4 |     return checkpoint(self.layer, h, attention_mask=mask)
  |
note: This is an unsafe fix and may change runtime behavior

CKPT032 [*] error: keyword argument `attention_mask` passed to a reentrant `checkpoint` (`use_reentrant` omitted, so torch defaults to reentrant): torch raises `ValueError: Unexpected keyword arguments: attention_mask` at runtime; pass `use_reentrant=False`
 --> src/model.py:4:12
  |
2 | def forward(self, h, mask):
3 |     h = checkpoint(self.layer, h)
4 |     return checkpoint(self.layer, h, attention_mask=mask)
  |            ^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^
help: Set `use_reentrant=False`
  |
3 |     h = checkpoint(self.layer, h)
  -     return checkpoint(self.layer, h, attention_mask=mask)
4 +     return checkpoint(self.layer, h, attention_mask=mask, use_reentrant=False)
  |

Found 2 findings (1 error, 1 warning).
[*] 1 fixable with the `--fix` option.
(1 hidden fix can be enabled with the `--unsafe-fixes` option.)
"""


@pytest.fixture
def small(make_project) -> Path:
    return make_project({"src/model.py": SMALL_MODEL}, pyproject=PYPROJECT)


def test_full_shows_the_source_a_caret_and_the_fix_as_a_diff(cli, small):
    result = run_format(cli, small, "full")
    assert (result.exit_code, result.stdout) == (1, FULL)
    # The rows of what --diff leaves are the fixed text's, shown from it.
    fixed = cli(["--output-format", "full", "--fix", "src"], cwd=small)
    left = "".join(line + "\n" for line in FULL.splitlines()[:17]).replace("attention_mask=mask)", "attention_mask=mask, use_reentrant=False)")
    assert fixed.stdout == left + "\nFound 2 findings (1 fixed, 1 remaining: 1 warning).\n(1 hidden fix can be enabled with the `--unsafe-fixes` option.)\n"


def test_full_from_standard_input_and_in_a_notebook_cell(cli, small):
    result = cli(["-", "--stdin-filename", "x.py", "--output-format", "full"], cwd=small, input=SMALL_MODEL)
    assert result.stdout.replace("x.py", "src/model.py") == FULL
    from test_notebooks import notebook

    (small / "nb.ipynb").write_text(notebook("import torch", "import torch.utils.checkpoint as cp\ny = cp.checkpoint(f, x)"))
    cell = cli(["nb.ipynb", "--output-format", "full"], cwd=small).stdout.splitlines()
    assert cell[1:6] == [
        " --> nb.ipynb:cell 2:2:5",
        "  |",
        "1 | import torch.utils.checkpoint as cp",
        "2 | y = cp.checkpoint(f, x)",
        "  |     ^^^^^^^^^^^^^^^^^^^",
    ]
    assert cell[6:9] == ["help: Add `use_reentrant=False`", "  |", "1 | import torch.utils.checkpoint as cp"]


def test_json_lines_is_the_json_list_one_item_a_line(cli, project):
    lines = run_format(cli, project, "json-lines").stdout.splitlines()
    assert [json.loads(line) for line in lines] == json.loads(run_format(cli, project, "json").stdout)
    assert all(": " not in line.split('"message"')[0] for line in lines)  # compact, as Ruff's


def _repository(make_project) -> Path:
    root = make_project({"src/model.py": SMALL_MODEL}, pyproject=PYPROJECT)
    (root / ".git").mkdir()
    return root


def test_gitlab_code_quality(cli, make_project, monkeypatch):
    root = _repository(make_project)
    monkeypatch.delenv("CI_PROJECT_DIR", raising=False)
    result = cli(["--output-format", "gitlab", "."], cwd=root / "src")  # a job in a subdirectory
    issues = json.loads(result.stdout)
    assert [
        (i["check_name"], i["severity"], i["location"], i["description"].split(":")[0]) for i in issues
    ] == [
        ("CKPT001", "minor", {"path": "src/model.py", "lines": {"begin": 3, "end": 3}}, "CKPT001"),
        ("CKPT032", "major", {"path": "src/model.py", "lines": {"begin": 4, "end": 4}}, "CKPT032"),
    ]
    assert issues[0]["description"] == "CKPT001: " + MSG001
    fingerprints = [i["fingerprint"] for i in issues]
    assert len(set(fingerprints)) == 2 and all(re.fullmatch(r"[0-9a-f]{32}", f) for f in fingerprints)
    # A line added above moves the findings, not their fingerprints.
    (root / "src/model.py").write_text("# header\n" + SMALL_MODEL)
    moved = json.loads(cli(["--output-format", "gitlab", "."], cwd=root / "src").stdout)
    assert [i["fingerprint"] for i in moved] == fingerprints
    assert [i["location"]["lines"]["begin"] for i in moved] == [4, 5]
    monkeypatch.setenv("CI_PROJECT_DIR", str(root / "src"))
    assert json.loads(cli(["--output-format", "gitlab", "."], cwd=root / "src").stdout)[0]["location"]["path"] == "model.py"


MSG001 = (
    "`checkpoint` without `use_reentrant`: torch falls back to the reentrant implementation "
    "and its warning cannot point at this line; pass `use_reentrant=False`"
)


def test_github_annotations_are_relative_to_the_repository_root(cli, make_project):
    root = _repository(make_project)
    from_subdirectory = cli(["--output-format", "github", "model.py"], cwd=root / "src")
    assert from_subdirectory.stdout.splitlines()[0].startswith(
        "::warning title=ckptlint (CKPT001),file=src/model.py,line=3,col=9,endLine=3,endColumn=34::CKPT001 "
    )
    # Without git, the project root.
    (root / ".git").rmdir()
    (root / "src" / "pyproject.toml").write_text(PYPROJECT)
    nested = cli(["--output-format", "github", "model.py"], cwd=root / "src")
    assert "file=model.py," in nested.stdout.splitlines()[0]


def test_rdjson(cli, project):
    result = json.loads(run_format(cli, project, "rdjson").stdout)
    assert result["source"] == {"name": "ckptlint", "url": "https://github.com/ckptlint/ckptlint"}
    assert result["severity"] == "ERROR"
    rows = [
        (d["code"]["value"], d["location"]["range"]["start"]["line"], d["location"]["range"]["start"]["column"])
        for d in result["diagnostics"]
    ]
    # Row 11: `note = "héllo ✓"; h = ck(...)`: character column 31 is UTF-8 byte column 34.
    assert rows == [("CKPT900", 1, 7), ("CKPT001", 6, 8), ("CKPT001", 11, 34), ("CKPT032", 12, 13), ("CKPT001", 13, 13), ("CKPT001", 17, 13)]
    first = result["diagnostics"][1]
    assert first["location"]["path"] == str((project / "src/model.py").resolve())
    assert first["code"]["url"] == URL.format("CKPT001")
    assert first["suggestions"] == [
        {"range": {"start": {"line": 6, "column": 84}, "end": {"line": 6, "column": 84}}, "text": ", use_reentrant=False"}
    ]
    assert "suggestions" not in result["diagnostics"][0]


def test_every_format_is_listed_in_the_usage_docs_and_help(cli, small):
    from ckptlint.reporters import FORMATS

    readme = (Path(__file__).parent.parent / "docs" / "usage.md").read_text()
    help_text = cli(["check", "--help"], cwd=small).stdout
    for name in FORMATS:
        assert f"--output-format {name}" in readme or name in ("text", "concise"), name
        assert name in help_text, name
