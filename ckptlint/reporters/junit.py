"""JUnit XML: a test suite per file, a failing test case per diagnostic."""

from __future__ import annotations

import itertools
import xml.etree.ElementTree as ET
from collections.abc import Sequence

from ckptlint.reporters import ReportContext
from ckptlint.types import Diagnostic


def render(diagnostics: Sequence[Diagnostic], *, not_shown: str = "", context: ReportContext = ReportContext()) -> str:
    """JUnit's schema has no run-level note for `not_shown` (the CLI says it on stderr)."""
    root = ET.Element("testsuites", name="ckptlint", tests=str(max(len(diagnostics), 1)), failures=str(len(diagnostics)), errors="0")
    if not diagnostics:
        suite = ET.SubElement(root, "testsuite", name="ckptlint", tests="1", failures="0", errors="0")
        ET.SubElement(suite, "testcase", name="No errors found", classname="ckptlint")
    for path, group in itertools.groupby(diagnostics, key=lambda d: d.path):
        items = list(group)
        suite = ET.SubElement(
            root, "testsuite", name=path, tests=str(len(items)), failures=str(len(items)), errors="0"
        )
        for d in items:
            case = ET.SubElement(
                suite,
                "testcase",
                name=f"org.ckptlint.{d.code}",
                classname=path,
                file=path,
                line=str(d.location.row),
            )
            failure = ET.SubElement(case, "failure", message=f"{d.code} {d.message}", type=d.severity.value)
            cell = f"cell {d.cell}, " if d.cell is not None else ""  # a notebook's rows are its cell's
            failure.text = f"{cell}line {d.location.row}, col {d.location.column}, {d.code} {d.message}"
    ET.indent(root)
    return '<?xml version="1.0" encoding="UTF-8"?>\n' + ET.tostring(root, encoding="unicode") + "\n"
