"""Parser for `dcgmi diag -r LEVEL -j`: DCGM's diagnostic verdict per test and per GPU.

The document (DCGM `nvvs/include/NvvsJsonStrings.h`, `nvvs/src/JsonOutput.cpp`) is one object
under "DCGM GPU Diagnostic" (DCGM 3.x) or "DCGM Diagnostic" (4.x, NVVS_NAME at 4.6.0), holding
"test_categories": each a "category" (Deployment, Integration, Hardware, Stress, Custom) and
its "tests", each a "name" and "results": one per GPU, or one for all GPUs with "gpu_ids"
"0,1,2,3" (deployment checks), with a "status" (PASS/Pass, FAIL/Fail, Warn, Skip) and
optional "warnings"/"info". The GPU is "gpu_ids" (a string or a number), "gpu_id" (3.3, seen
in level 3 output) or "entity_id" with "entity_group" (4.x). DCGM 3.1 writes `null` between
tests, and dcgmi may print a line before the document (its own test keeps one); both are
skipped. Level 1 holds the Deployment category alone; levels 2-4 add the others.

A document cut short is invalid JSON and refused; so is one with no test, or a status this
parser does not know, since a diagnostic it cannot read must never count as passed.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, Literal

from myriad.node.parsers.common import ParseFailure, first_line, guarded, require_text

__all__ = ["DcgmDiag", "DcgmResult", "DcgmTest", "parse_dcgmi_diag"]

TOOL = "dcgmi diag"

Status = Literal["pass", "fail", "warn", "skip"]
_STATUS: dict[str, Status] = {
    "pass": "pass",
    "fail": "fail",
    "warn": "warn",
    "warning": "warn",
    "skip": "skip",
    "skipped": "skip",
    "not run": "skip",
}
_ROOTS = ("DCGM Diagnostic", "DCGM GPU Diagnostic")


@dataclass(frozen=True, slots=True)
class DcgmResult:
    gpus: tuple[int, ...]  # empty where the result names no GPU
    status: Status
    warnings: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class DcgmTest:
    category: str
    name: str
    results: tuple[DcgmResult, ...]

    @property
    def status(self) -> Status:
        """The worst of its results: fail, then warn, then pass; skip only if all skipped."""
        statuses = {result.status for result in self.results}
        for status in ("fail", "warn", "pass"):
            if status in statuses:
                return status
        return "skip"


@dataclass(frozen=True, slots=True)
class DcgmDiag:
    version: str | None
    tests: tuple[DcgmTest, ...]

    @property
    def categories(self) -> tuple[str, ...]:
        return tuple(dict.fromkeys(test.category for test in self.tests))

    @property
    def failed(self) -> tuple[DcgmTest, ...]:
        return tuple(test for test in self.tests if test.status == "fail")

    @property
    def passed(self) -> bool:
        """DCGM's own verdict: no test failed. Warnings and skips are reported, not failed."""
        return not self.failed

    def failing_gpus(self) -> tuple[int, ...]:
        return tuple(
            sorted(
                {
                    gpu
                    for test in self.failed
                    for r in test.results
                    if r.status == "fail"
                    for gpu in r.gpus
                }
            )
        )


def _document(body: str) -> Any:
    lines = body.splitlines()
    start = next((i for i, line in enumerate(lines) if line.lstrip().startswith("{")), None)
    if start is None:
        raise ParseFailure(TOOL, f"could not read a JSON document: {first_line(body)!r}")
    try:
        return json.loads("\n".join(lines[start:]))
    except json.JSONDecodeError as exc:
        raise ParseFailure(
            TOOL, f"could not read the JSON document ({exc.msg} at line {exc.lineno + start})"
        ) from None


def _gpus(result: dict[str, Any]) -> tuple[int, ...]:
    for key in ("gpu_ids", "gpu_id", "entity_id"):
        if key not in result:
            continue
        if key == "entity_id" and result.get("entity_group", "GPU") != "GPU":
            return ()
        value = result[key]
        if isinstance(value, bool):
            break
        if isinstance(value, int):
            return (value,)
        if isinstance(value, str) and all(p.strip().isdigit() for p in value.split(",")):
            return tuple(int(p) for p in value.split(","))
        raise ParseFailure(TOOL, f"could not read the GPU of a result: {key}={value!r}")
    return ()


def _warnings(result: dict[str, Any]) -> tuple[str, ...]:
    found = result.get("warnings") or ()
    if not isinstance(found, list):
        return ()
    out = []
    for item in found:
        text = item.get("warning") if isinstance(item, dict) else item
        if isinstance(text, str):
            out.append(" ".join(text.split()))
    return tuple(out)


def _result(test: str, result: Any) -> DcgmResult:
    if not isinstance(result, dict) or not isinstance(result.get("status"), str):
        raise ParseFailure(TOOL, f"could not read a result of test {test!r}: {result!r}")
    status = _STATUS.get(result["status"].strip().lower())
    if status is None:
        raise ParseFailure(TOOL, f"could not read status {result['status']!r} of test {test!r}")
    return DcgmResult(_gpus(result), status, _warnings(result))


@guarded(TOOL)
def parse_dcgmi_diag(text: str) -> DcgmDiag:
    """Read `dcgmi diag -j` output of any run level."""
    document = _document(require_text(TOOL, text))
    root = next((document[k] for k in _ROOTS if isinstance(document, dict) and k in document), None)
    if not isinstance(root, dict):
        raise ParseFailure(TOOL, "could not read the document: no 'DCGM Diagnostic' object")
    if isinstance(root.get("runtime_error"), str):
        raise ParseFailure(TOOL, f"could not run the diagnostic: {root['runtime_error']}")
    categories = root.get("test_categories")
    if not isinstance(categories, list):
        raise ParseFailure(TOOL, "could not read 'test_categories'")
    tests: list[DcgmTest] = []
    for category in categories:
        if not isinstance(category, dict) or not isinstance(category.get("tests"), list):
            raise ParseFailure(TOOL, f"could not read a test category: {category!r}")
        name = str(category.get("category", ""))
        for test in category["tests"]:
            if test is None:  # DCGM 3.1 separates tests with null
                continue
            if not isinstance(test, dict) or not isinstance(test.get("results"), list):
                raise ParseFailure(TOOL, f"could not read a test of {name!r}: {test!r}")
            title = str(test.get("name", ""))
            results = tuple(_result(title, result) for result in test["results"])
            if not results:
                raise ParseFailure(TOOL, f"could not read a result of test {title!r}")
            tests.append(DcgmTest(name, title, results))
    if not tests:
        raise ParseFailure(TOOL, "could not read any test in the document")
    version = root.get("version")
    return DcgmDiag(version if isinstance(version, str) else None, tuple(tests))
