"""YAML reading that keeps the line and column of every value and refuses ambiguous input.

Plain scalars are resolved with the YAML 1.2 core schema rather than PyYAML's 1.1 rules, so
`yes`, `on` and `0755` stay strings instead of silently becoming booleans and octal numbers;
the strict models then say precisely what type was expected.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from typing import Any

import yaml
from yaml.nodes import MappingNode, Node, ScalarNode, SequenceNode

from myriad.errors import Path, Problem, SpecError

# A spec of any real cluster is a few hundred values; far more means an alias bomb.
MAX_VALUES = 200_000
MAX_BYTES = 8 * 1024 * 1024

_STANDARD_TAGS = {
    "tag:yaml.org,2002:str",
    "tag:yaml.org,2002:int",
    "tag:yaml.org,2002:float",
    "tag:yaml.org,2002:bool",
    "tag:yaml.org,2002:null",
    "tag:yaml.org,2002:map",
    "tag:yaml.org,2002:seq",
    "tag:yaml.org,2002:timestamp",
    "tag:yaml.org,2002:value",
    "tag:yaml.org,2002:merge",
}
_NULL = re.compile(r"^(~|null|Null|NULL|)$")
_BOOL = re.compile(r"^(true|True|TRUE|false|False|FALSE)$")
_INT = re.compile(r"^[-+]?[0-9]+$")
_INT_OCT = re.compile(r"^0o[0-7]+$")
_INT_HEX = re.compile(r"^0x[0-9a-fA-F]+$")
_FLOAT = re.compile(r"^[-+]?(\.[0-9]+|[0-9]+(\.[0-9]*)?)([eE][-+]?[0-9]+)?$")
_INF = re.compile(r"^[-+]?(\.inf|\.Inf|\.INF)$")
_NAN = re.compile(r"^(\.nan|\.NaN|\.NAN)$")
_YAML11_BOOLEANS = {"yes", "no", "on", "off"}


@dataclass(frozen=True, slots=True)
class Mark:
    line: int
    column: int


@dataclass(slots=True)
class SourceMap:
    """Where each value (and each mapping key) of a document sits in its file."""

    file: str
    values: dict[Path, Mark] = field(default_factory=dict)
    keys: dict[Path, Mark] = field(default_factory=dict)

    def mark_for(self, path: Path) -> Mark:
        """The closest known place: the key itself, else its value, else the nearest parent."""
        for end in range(len(path), -1, -1):
            prefix = path[:end]
            if prefix in self.keys:
                return self.keys[prefix]
            if prefix in self.values:
                return self.values[prefix]
        return Mark(1, 1)

    def problem(self, path: Path, message: str, hint: str = "") -> Problem:
        mark = self.mark_for(path)
        return Problem(self.file, mark.line, mark.column, path, message, hint)


@dataclass(frozen=True, slots=True)
class Document:
    data: dict[str, Any]
    source: SourceMap


def _mark(node: Node) -> Mark:
    return Mark(node.start_mark.line + 1, node.start_mark.column + 1)


def resolve_plain(text: str) -> Any:
    """A plain (unquoted) scalar under the YAML 1.2 core schema."""
    if _NULL.match(text):
        return None
    if _BOOL.match(text):
        return text.lower() == "true"
    if _INT.match(text):
        return int(text)
    if _INT_OCT.match(text):
        return int(text[2:], 8)
    if _INT_HEX.match(text):
        return int(text[2:], 16)
    if _FLOAT.match(text):
        return float(text)
    if _INF.match(text):
        return -math.inf if text.startswith("-") else math.inf
    if _NAN.match(text):
        return math.nan
    return text


class _Builder:
    def __init__(self, source: SourceMap) -> None:
        self.source = source
        self.problems: list[Problem] = []
        self.count = 0
        self.active: set[int] = set()
        self.bomb = False

    def build(self, node: Node, path: Path) -> Any:
        self.count += 1
        if self.count > MAX_VALUES:
            if not self.bomb:
                self.bomb = True
                self.problems.append(
                    self.source.problem(
                        path[:1],
                        f"the document expands to more than {MAX_VALUES} values",
                        "aliases (*name) that repeat anchors many times multiply the document; "
                        "write the values out or use fewer nested aliases",
                    )
                )
            return None
        self.source.values.setdefault(path, _mark(node))
        if node.tag not in _STANDARD_TAGS:
            self._bad_tag(node, path)
            return None
        if id(node) in self.active:
            self.problems.append(
                self.source.problem(
                    path, "an alias refers to the anchor that contains it", "remove the cycle"
                )
            )
            return None
        if isinstance(node, ScalarNode):
            return self._scalar(node)
        self.active.add(id(node))
        try:
            if isinstance(node, SequenceNode):
                # Tuples, because the frozen models hold sequences as tuples.
                return tuple(self.build(item, (*path, i)) for i, item in enumerate(node.value))
            if isinstance(node, MappingNode):
                return self._mapping(node, path)
        finally:
            self.active.discard(id(node))
        raise AssertionError(f"unknown YAML node {type(node).__name__}")

    def _bad_tag(self, node: Node, path: Path) -> None:
        self.problems.append(
            self.source.problem(
                path,
                f"the YAML tag {node.tag.replace('tag:yaml.org,2002:', '!!')} is not allowed "
                "in a spec",
                "remove the tag; specs hold plain mappings, lists, strings and numbers",
            )
        )

    @staticmethod
    def _scalar(node: ScalarNode) -> Any:
        if node.style in ("'", '"', "|", ">"):
            return node.value
        return resolve_plain(node.value)

    def _mapping(self, node: MappingNode, path: Path) -> dict[str, Any]:
        result: dict[str, Any] = {}
        first_seen: dict[str, Mark] = {}
        for key_node, value_node in node.value:
            key_mark = _mark(key_node)
            if key_node.tag == "tag:yaml.org,2002:merge":
                self.problems.append(
                    Problem(
                        self.source.file,
                        key_mark.line,
                        key_mark.column,
                        path,
                        "merge keys (<<) are not supported",
                        "write the keys out, or put an anchor on a whole value and alias it",
                    )
                )
                continue
            if not isinstance(key_node, ScalarNode):
                self.problems.append(
                    Problem(
                        self.source.file,
                        key_mark.line,
                        key_mark.column,
                        path,
                        "a mapping key must be a plain string, not a list or mapping",
                        "use a simple name as the key",
                    )
                )
                continue
            key = self._key(key_node, key_mark, path)
            if key is None:
                continue
            key_path = (*path, key)
            if key in first_seen:
                first = first_seen[key]
                self.problems.append(
                    Problem(
                        self.source.file,
                        key_mark.line,
                        key_mark.column,
                        key_path,
                        f"duplicate key '{key}' (first at line {first.line})",
                        "YAML would silently keep only the last one; keep one and delete the other",
                    )
                )
                continue
            first_seen[key] = key_mark
            self.source.keys.setdefault(key_path, key_mark)
            result[key] = self.build(value_node, key_path)
        return result

    def _key(self, key_node: ScalarNode, mark: Mark, path: Path) -> str | None:
        text = key_node.value
        if key_node.style in ("'", '"'):
            return text
        value = resolve_plain(text)
        if isinstance(value, str) and text.lower() not in _YAML11_BOOLEANS:
            return text
        self.problems.append(
            Problem(
                self.source.file,
                mark.line,
                mark.column,
                path,
                f"the key {text!r} is ambiguous: YAML tools read it as {type(value).__name__}"
                if text.lower() not in _YAML11_BOOLEANS
                else f"the key {text!r} is ambiguous: YAML 1.1 tools read it as a boolean",
                f'quote it ("{text}") if it is meant as a name',
            )
        )
        return None


def _tab_problems(text: str, file: str) -> list[Problem]:
    problems = []
    for number, line in enumerate(text.splitlines(), start=1):
        indent = len(line) - len(line.lstrip(" \t"))
        if "\t" in line[:indent]:
            problems.append(
                Problem(
                    file,
                    number,
                    line.index("\t") + 1,
                    (),
                    "a tab is used for indentation",
                    "YAML indents with spaces only; replace the tab with spaces",
                )
            )
    return problems


def _syntax_problem(exc: yaml.MarkedYAMLError, file: str) -> Problem:
    mark = exc.problem_mark or exc.context_mark
    line, column = (mark.line + 1, mark.column + 1) if mark else (1, 1)
    what = exc.problem or "not valid YAML"
    context = f" ({exc.context})" if exc.context else ""
    return Problem(file, line, column, (), f"YAML syntax: {what}{context}", "fix the YAML syntax")


def parse_document(text: str, file: str) -> Document:
    """Parse one YAML document into plain data plus its source map, or raise SpecError."""
    source = SourceMap(file)
    if len(text.encode("utf-8", "surrogatepass")) > MAX_BYTES:
        raise SpecError(
            [source.problem((), f"the file is larger than {MAX_BYTES // 1024 // 1024} MiB")]
        )
    tab_problems = _tab_problems(text, file)
    if tab_problems:
        raise SpecError(tab_problems)
    try:
        nodes = list(yaml.compose_all(text, Loader=yaml.SafeLoader))
    except yaml.MarkedYAMLError as exc:
        raise SpecError([_syntax_problem(exc, file)]) from exc
    except yaml.YAMLError as exc:
        raise SpecError([source.problem((), f"YAML could not be read: {exc}")]) from exc
    nodes = [n for n in nodes if n is not None]
    if not nodes:
        raise SpecError(
            [source.problem((), "the file is empty", "start with apiVersion: myriad/v1")]
        )
    if len(nodes) > 1:
        second = _mark(nodes[1])
        raise SpecError(
            [
                Problem(
                    file,
                    second.line,
                    second.column,
                    (),
                    "the file holds more than one YAML document",
                    "keep one cluster per file; remove the '---' separator",
                )
            ]
        )
    root = nodes[0]
    if not isinstance(root, MappingNode):
        mark = _mark(root)
        raise SpecError(
            [
                Problem(
                    file,
                    mark.line,
                    mark.column,
                    (),
                    "the document must be a mapping of sections (apiVersion, kind, metadata, ...)",
                    "start with apiVersion: myriad/v1",
                )
            ]
        )
    builder = _Builder(source)
    data = builder.build(root, ())
    if builder.problems:
        raise SpecError(builder.problems)
    return Document(data=data, source=source)
