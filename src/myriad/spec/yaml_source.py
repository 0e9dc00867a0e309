"""YAML reading that keeps the line and column of every value and refuses ambiguous input.

Plain scalars are resolved with the YAML 1.2 core schema rather than PyYAML's 1.1 rules, so
`yes`, `on` and `0755` stay strings instead of silently becoming booleans and octal numbers;
the strict models then say precisely what type was expected.

The document is built from the parser's event stream with an explicit stack (libyaml's
parser where installed), not PyYAML's recursive composer: any nesting ends in a located
error instead of a RecursionError, and a 100,000-GPU spec with every host written out
parses in a fraction of a second.
"""

from __future__ import annotations

import math
import re
import unicodedata
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import yaml
from yaml.events import (
    AliasEvent,
    DocumentStartEvent,
    Event,
    MappingEndEvent,
    MappingStartEvent,
    ScalarEvent,
    SequenceEndEvent,
    SequenceStartEvent,
    StreamEndEvent,
)

from myriad.errors import Path, Problem, SpecError

# A spec of any real cluster is a few hundred values, and a bare-metal one that lists
# every host of 100,000 GPUs about 60,000; far more means an alias bomb.
MAX_VALUES = 200_000
# The bare-metal spec of 12,500 nodes (100,000 GPUs) with every host written out is
# about 1.6 MB; a file over 4 MB is not a spec someone wrote.
MAX_BYTES = 4_000_000
# Real specs nest six levels (catalog -> servers -> name -> cpu -> sockets).
MAX_DEPTH = 32
# YAML's own limit on an implicit key (the YAML 1.2 spec, 7.4.2: 1024 characters).
MAX_KEY_CHARS = 1024
# No spec field takes a number with more digits than this; int() refuses beyond 4300.
MAX_DIGITS = 30

_TOO_DEEP = f"the document nests more than {MAX_DEPTH} levels deep"
_TOO_DEEP_HINT = (
    "a spec nests a few levels (catalog: servers: name: cpu: sockets); look for unclosed "
    "brackets or runaway indentation here"
)
_LOADER: Any = getattr(yaml, "CSafeLoader", yaml.SafeLoader)

_STANDARD_TAGS = {
    "tag:yaml.org,2002:str",
    "tag:yaml.org,2002:int",
    "tag:yaml.org,2002:float",
    "tag:yaml.org,2002:bool",
    "tag:yaml.org,2002:null",
    "tag:yaml.org,2002:map",
    "tag:yaml.org,2002:seq",
}
_NULL = re.compile(r"^(~|null|Null|NULL|)$")
_BOOL = re.compile(r"^(true|True|TRUE|false|False|FALSE)$")
_INT = re.compile(r"^[-+]?[0-9]+$")
_INT_OCT = re.compile(r"^0o[0-7]+$")
_INT_HEX = re.compile(r"^0x[0-9a-fA-F]+$")
_FLOAT = re.compile(r"^[-+]?(\.[0-9]+|[0-9]+(\.[0-9]*)?)([eE][-+]?[0-9]+)?$")
_INF = re.compile(r"^[-+]?(\.inf|\.Inf|\.INF)$")
_NAN = re.compile(r"^(\.nan|\.NaN|\.NAN)$")
_NUMBER = re.compile(r"^[-+]?[0-9]+(\.[0-9]*)?$")
_YAML11_BOOLEANS = {"yes", "no", "on", "off"}
_WORDS = {"null", "Null", "NULL", "true", "True", "TRUE", "false", "False", "FALSE"}
# Characters YAML does not allow in a stream (YAML 1.2, 5.1 c-printable), plus the
# surrogates a broken decoder leaves behind.
_UNPRINTABLE = re.compile("[^\t\n\r\x20-\x7e\x85\xa0-\ud7ff\ue000-\ufffd\U00010000-\U0010ffff]")
_CONTROL_NAMES = {"\x00": "NUL", "\x1b": "ESC", "\x7f": "DEL", "\x08": "backspace"}


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


def _mark(event: Event) -> Mark:
    start = event.start_mark
    # Every event the parser emits carries its marks; the stubs allow None.
    return Mark(start.line + 1, start.column + 1) if start is not None else Mark(1, 1)


def resolve_plain(text: str) -> Any:
    """A plain (unquoted) scalar under the YAML 1.2 core schema.

    An integer too long for any field resolves to infinity, so that it is refused with the
    other numbers no field can hold instead of exhausting int().
    """
    if text[:1].isalpha() and text not in _WORDS:
        return text  # the usual case, a name: no number or null starts with a letter
    if _NULL.match(text):
        return None
    if _BOOL.match(text):
        return text.lower() == "true"
    if _INT.match(text) or _INT_OCT.match(text) or _INT_HEX.match(text):
        digits = text.lstrip("+-")
        if len(digits) > MAX_DIGITS:
            return -math.inf if text.startswith("-") else math.inf
        if _INT.match(text):
            return int(text)
        return int(text[2:], 8 if text[1] == "o" else 16)
    if _FLOAT.match(text):
        return float(text)
    if _INF.match(text):
        return -math.inf if text.startswith("-") else math.inf
    if _NAN.match(text):
        return math.nan
    return text


def _shown(text: str, limit: int = 40) -> str:
    return repr(text if len(text) <= limit else f"{text[:limit]}...")


@dataclass(slots=True)
class _Frame:
    """A mapping or sequence being built."""

    path: Path
    value: Any  # dict or list
    anchor: str | None
    discard: bool
    value_log: int  # where this node's marks start in the logs, for its anchor
    key_log: int
    key: str | None = None  # mapping: the key whose value comes next
    key_event: Event | None = None
    bad_key: bool = False  # mapping: the next value belongs to a refused key
    first_seen: dict[str, Mark] = field(default_factory=dict)
    last_value: Event | None = None  # mapping: the last scalar value, for decimal commas
    last_path: Path = ()
    is_key: bool = False  # a collection used as a mapping key: built only to be dropped


_DISCARDED = _Frame((), None, None, True, 0, 0)


@dataclass(slots=True)
class _Anchor:
    value: Any
    size: int
    values: list[tuple[Path, Mark]]
    keys: list[tuple[Path, Mark]]


class _Builder:
    def __init__(self, source: SourceMap, text: str) -> None:
        self.source = source
        self.text = text
        self.problems: list[Problem] = []
        self.count = 0
        self.bomb = False
        self.aliased = False  # whether any alias was expanded
        self.anchors: dict[str, _Anchor | None] = {}  # None: still being built
        self.value_log: list[tuple[Path, Mark]] = []
        self.key_log: list[tuple[Path, Mark]] = []

    def problem_at(self, event: Event, path: Path, message: str, hint: str = "") -> None:
        mark = _mark(event)
        self.problems.append(Problem(self.source.file, mark.line, mark.column, path, message, hint))

    # --- the document: events in, plain data out ------------------------------------------

    def build(self, events: Iterator[Event], first: Event) -> Any:
        stack: list[_Frame] = []
        event: Event = first
        while True:
            finished = self._step(event, stack)
            if finished is not None:
                frame, value = finished
                if not stack:
                    return value
                if frame is None or not frame.is_key:
                    self._place(stack[-1], value, frame is not None and frame.discard)
            event = next(events)

    def _next_path(self, stack: list[_Frame]) -> tuple[Path, bool]:
        """The path of the node that comes next, and whether it is thrown away."""
        if not stack:
            return (), False
        top = stack[-1]
        if isinstance(top.value, list):
            return (*top.path, len(top.value)), top.discard
        return (*top.path, top.key if top.key is not None else "?"), top.discard or top.bad_key

    def _step(self, event: Event, stack: list[_Frame]) -> tuple[_Frame | None, Any] | None:
        """Feed one event; (its frame, value) once a whole node is complete."""
        top = stack[-1] if stack else None
        expects_key = top is not None and isinstance(top.value, dict) and top.key_event is None
        if isinstance(event, (SequenceEndEvent, MappingEndEvent)):
            return self._close(stack)
        if expects_key:
            assert top is not None
            self._key(event, stack)
            return None
        path, discard = self._next_path(stack)
        if isinstance(event, AliasEvent):
            value = self._alias(event, path, discard)
            return (None, value) if not discard else (_DISCARDED, None)
        if not discard:
            self.count += 1
            if self.count > MAX_VALUES:
                discard = self._bomb(path)
        if not discard and not self._tag_allowed(event, path):
            discard = True
        if not discard:
            self.value_log.append((path, _mark(event)))
        if isinstance(event, ScalarEvent):
            if discard:
                return _DISCARDED, None
            value = self._scalar(event, path)
            if event.anchor is not None:
                self.anchors[event.anchor] = _Anchor(value, 1, [((), _mark(event))], [])
            if top is not None and isinstance(top.value, dict):
                top.last_value, top.last_path = event, path
            return None, value
        if isinstance(event, (MappingStartEvent, SequenceStartEvent)):
            self._open(event, stack, path, discard, is_key=False)
            return None
        raise AssertionError(f"unexpected YAML event {type(event).__name__}")

    def _open(
        self, event: Event, stack: list[_Frame], path: Path, discard: bool, *, is_key: bool
    ) -> None:
        if len(stack) >= MAX_DEPTH:
            self.problem_at(
                event,
                path[:2],
                _TOO_DEEP,
                _TOO_DEEP_HINT,
            )
            raise SpecError(self.problems)
        if stack and isinstance(stack[-1].value, dict):
            stack[-1].last_value = None
        anchor = getattr(event, "anchor", None)
        if anchor is not None and not discard:
            self.anchors[anchor] = None
        stack.append(
            _Frame(
                path=path,
                value={} if isinstance(event, MappingStartEvent) else [],
                anchor=anchor,
                discard=discard,
                value_log=len(self.value_log),
                key_log=len(self.key_log),
                is_key=is_key,
            )
        )

    def _close(self, stack: list[_Frame]) -> tuple[_Frame | None, Any]:
        frame = stack.pop()
        # Tuples, because the frozen models hold sequences as tuples.
        value = tuple(frame.value) if isinstance(frame.value, list) else frame.value
        if frame.anchor is not None and not frame.discard:
            depth = len(frame.path)
            self.anchors[frame.anchor] = _Anchor(
                value,
                len(self.value_log) - frame.value_log,
                [(p[depth:], m) for p, m in self.value_log[frame.value_log :]],
                [(p[depth:], m) for p, m in self.key_log[frame.key_log :]],
            )
        return frame, value

    @staticmethod
    def _place(parent: _Frame, value: Any, discard: bool) -> None:
        if isinstance(parent.value, list):
            parent.value.append(value)
            return
        if not (discard or parent.discard or parent.bad_key) and parent.key is not None:
            parent.value[parent.key] = value
        parent.key, parent.key_event, parent.bad_key = None, None, False

    def _bomb(self, path: Path) -> bool:
        if not self.bomb:
            self.bomb = True
            # The source map is filled at the end; the top-level key is in the log.
            mark = next((m for p, m in self.key_log if p == path[:1]), Mark(1, 1))
            self.problems.append(
                Problem(
                    self.source.file,
                    mark.line,
                    mark.column,
                    path[:1],
                    f"the document expands to more than {MAX_VALUES:,} values"
                    if self.aliased
                    else f"the document holds more than {MAX_VALUES:,} values",
                    "aliases (*name) that repeat anchors many times multiply the document; "
                    "write the values out or use fewer nested aliases"
                    if self.aliased
                    else "a spec of the largest cluster holds about a third of that; is this "
                    "the right file?",
                )
            )
        return True

    def _alias(self, event: AliasEvent, path: Path, discard: bool) -> Any:
        anchor = self.anchors.get(event.anchor or "", False)
        if discard:
            return None
        if anchor is False:
            self.problem_at(
                event,
                path,
                f"the alias *{event.anchor} names no anchor before it",
                f"define &{event.anchor} on a value above this line",
            )
            return None
        if anchor is None:
            self.problem_at(
                event, path, "an alias refers to the anchor that contains it", "remove the cycle"
            )
            return None
        assert isinstance(anchor, _Anchor)
        self.aliased = True
        self.count += anchor.size
        if self.count > MAX_VALUES:
            self._bomb(path)
            return None
        for relative, mark in anchor.values:
            full = (*path, *relative)
            self.value_log.append((full, mark))
        for relative, mark in anchor.keys:
            self.key_log.append(((*path, *relative), mark))
        return anchor.value

    def _tag_allowed(self, event: Event, path: Path) -> bool:
        tag = getattr(event, "tag", None)
        if tag in (None, "!") or tag in _STANDARD_TAGS:
            return True
        self.problem_at(
            event,
            path,
            f"the YAML tag {tag.replace('tag:yaml.org,2002:', '!!')} is not allowed in a spec",
            "remove the tag; specs hold plain mappings, lists, strings and numbers",
        )
        return False

    def _scalar(self, event: ScalarEvent, path: Path) -> Any:
        if event.style or event.tag == "tag:yaml.org,2002:str" or event.tag == "!":
            return event.value
        value = resolve_plain(event.value)
        if isinstance(value, float) and not math.isfinite(value):
            if _INF.match(event.value) or _NAN.match(event.value):
                message = f"{_shown(event.value)} is not a finite number"
            else:
                message = f"the number {_shown(event.value)} is too large for any field"
            self.problem_at(
                event,
                path,
                message,
                "spec numbers are finite and of a size hardware has; "
                f'quote it ("{event.value[:40]}") if it is meant as text',
            )
            return None
        return value

    # --- mapping keys ---------------------------------------------------------------------

    def _key(self, event: Event, stack: list[_Frame]) -> None:
        frame = stack[-1]
        frame.key_event = event
        frame.key, frame.bad_key = None, True
        if not isinstance(event, ScalarEvent):
            if not frame.discard:
                self.problem_at(
                    event,
                    frame.path,
                    "a mapping key must be a plain string, not a list, mapping or alias",
                    "use a simple name as the key",
                )
            if isinstance(event, (MappingStartEvent, SequenceStartEvent)):
                # Built, thrown away; the event after it is the key's value.
                self._open(event, stack, frame.path, True, is_key=True)
            return
        if frame.discard:
            return
        mark = _mark(event)
        if event.tag not in (None, "!", "tag:yaml.org,2002:str"):
            self._tag_allowed(event, frame.path)
            return
        text = event.value
        if not event.style and text == "<<":
            self.problem_at(
                event,
                frame.path,
                "merge keys (<<) are not supported",
                "write the keys out, or put an anchor on a whole value and alias it",
            )
            return
        key = text if event.style or event.tag else self._plain_key(event, frame)
        if key is None:
            return
        key_path = (*frame.path, key)
        if key in frame.first_seen:
            first = frame.first_seen[key]
            self.problem_at(
                event,
                key_path,
                f"duplicate key {_shown(key)} (first at line {first.line})",
                "YAML would silently keep only the last one; keep one and delete the other",
            )
            return
        frame.first_seen[key] = mark
        self.key_log.append((key_path, mark))
        frame.key, frame.bad_key = key, False

    def _plain_key(self, event: ScalarEvent, frame: _Frame) -> str | None:
        text = event.value
        value = resolve_plain(text)
        if isinstance(value, str) and text.lower() not in _YAML11_BOOLEANS:
            return text
        previous = frame.last_value
        if (
            previous is not None
            and isinstance(previous, ScalarEvent)
            and not previous.style
            and _NUMBER.match(previous.value)
            and _NUMBER.match(text)
            and previous.end_mark is not None
            and event.start_mark is not None
            and self.text[previous.end_mark.index : event.start_mark.index].strip() == ","
        ):
            # `{pue: 1,4}`: the comma ended the value, so '4' became a key of its own.
            self.problem_at(
                previous,
                frame.last_path,
                f"'{previous.value},{text}' is a number written with a decimal comma",
                f"write {previous.value}.{text}: YAML numbers take a decimal point, and a comma "
                "separates entries",
            )
            return None
        if text.lower() in _YAML11_BOOLEANS:
            message = f"the key {_shown(text)} is ambiguous: YAML 1.1 tools read it as a boolean"
        else:
            message = (
                f"the key {_shown(text)} is ambiguous: YAML tools read it as {type(value).__name__}"
            )
        self.problem_at(event, frame.path, message, f'quote it ("{text}") if it is meant as a name')
        return None


# --- checks on the text before it is parsed -----------------------------------------------


def _position(text: str, index: int) -> tuple[int, int]:
    line = text.count("\n", 0, index) + 1
    return line, index - (text.rfind("\n", 0, index) + 1) + 1


def _character_problems(text: str, file: str) -> list[Problem]:
    problems = []
    for match in _UNPRINTABLE.finditer(text):
        char = match.group()
        name = _CONTROL_NAMES.get(char) or unicodedata.name(char, "a control character")
        line, column = _position(text, match.start())
        problems.append(
            Problem(
                file,
                line,
                column,
                (),
                f"the file holds U+{ord(char):04X} ({name}), which YAML does not allow",
                "delete it; a spec is plain text (was a binary or a terminal capture pasted in?)",
            )
        )
        if len(problems) == 5:
            break
    return problems


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


def _long_key(text: str, file: str, line: int) -> Problem | None:
    """PyYAML and libyaml both give up on a key past 1024 characters with a baffling message."""
    lines = text.splitlines()
    for number in (line, line - 1):
        if not 1 <= number <= len(lines):
            continue
        content = lines[number - 1]
        stripped = content.lstrip(" -")
        key = stripped.split(": ", 1)[0].rstrip(":")
        if len(key) > MAX_KEY_CHARS:
            return Problem(
                file,
                number,
                len(content) - len(stripped) + 1,
                (),
                f"a key of {len(key):,} characters; YAML reads keys of at most "
                f"{MAX_KEY_CHARS} characters",
                "use a short name as the key",
            )
    return None


def _remember_last(events: Iterator[Event], seen: list[Event]) -> Iterator[Event]:
    for event in events:
        seen[:] = [event]
        yield event


def _runaway_quote(seen: list[Event], exc: yaml.MarkedYAMLError, file: str) -> Problem | None:
    """A quote left open swallows the lines after it; the parser only notices much later."""
    last = seen[0] if seen else None
    if not (isinstance(last, ScalarEvent) and last.style in ("'", '"')):
        return None
    start, end = last.start_mark, last.end_mark
    if start is None or end is None or exc.problem_mark is None:
        return None
    if end.line == start.line or exc.problem_mark.line < end.line:
        return None
    return Problem(
        file,
        start.line + 1,
        start.column + 1,
        (),
        f"the quote opened here runs on to line {end.line + 1}: the value swallowed the "
        "lines in between",
        f"close the value with {last.style} on the line where it starts",
    )


def _syntax_problem(exc: yaml.MarkedYAMLError, text: str, file: str) -> Problem:
    mark = exc.problem_mark or exc.context_mark
    line, column = (mark.line + 1, mark.column + 1) if mark else (1, 1)
    what = exc.problem or "not valid YAML"
    if "nesting depth" in what:  # libyaml's own limit (1000) on flow levels
        return Problem(file, line, column, (), _TOO_DEEP, _TOO_DEEP_HINT)
    if "simple key" in str(exc.context) or "mapping values are not allowed" in what:
        long_key = _long_key(text, file, line)
        if long_key is not None:
            return long_key
    context = ""
    if exc.context and exc.context_mark and exc.context_mark is not mark:
        where = exc.context_mark
        context = (
            f" ({exc.context} that starts at line {where.line + 1}, column {where.column + 1})"
        )
    elif exc.context:
        context = f" ({exc.context})"
    hint = "fix the YAML syntax"
    if "mapping values are not allowed" in what:
        hint = 'quote a value that contains ": " (description: "a: b"), or check the indentation'
    return Problem(file, line, column, (), f"YAML syntax: {what}{context}", hint)


def parse_document(text: str, file: str) -> Document:
    """Parse one YAML document into plain data plus its source map, or raise SpecError."""
    source = SourceMap(file)
    size = len(text.encode("utf-8", "surrogatepass"))
    if size > MAX_BYTES:
        raise SpecError(
            [
                source.problem(
                    (),
                    f"the file is {size / 1e6:.1f} MB; a spec may be at most "
                    f"{MAX_BYTES / 1e6:.0f} MB",
                    "a bare-metal spec listing every host of 100,000 GPUs is about 1.6 MB; "
                    "is this the right file?",
                )
            ]
        )
    text_problems = _character_problems(text, file) or _tab_problems(text, file)
    if text_problems:
        raise SpecError(text_problems)
    seen: list[Event] = []
    events = _remember_last(yaml.parse(text, Loader=_LOADER), seen)
    try:
        return _document(events, text, source)
    except yaml.MarkedYAMLError as exc:
        raise SpecError(
            [_runaway_quote(seen, exc, file) or _syntax_problem(exc, text, file)]
        ) from None
    except yaml.YAMLError as exc:
        raise SpecError([source.problem((), f"YAML could not be read: {exc}")]) from None


def _document(events: Iterator[Event], text: str, source: SourceMap) -> Document:
    file = source.file
    root: Event | None = None
    for event in events:
        if isinstance(event, (ScalarEvent, MappingStartEvent, SequenceStartEvent, AliasEvent)):
            root = event
            break
        if isinstance(event, StreamEndEvent):
            break
    if root is None or (
        isinstance(root, ScalarEvent) and not root.style and _NULL.match(root.value)
    ):
        raise SpecError(
            [source.problem((), "the file is empty", "start with apiVersion: myriad/v1")]
        )
    if not isinstance(root, MappingStartEvent):
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
    builder = _Builder(source, text)
    data = builder.build(events, root)
    second = _next_document(events)
    if second is not None:
        mark = _mark(second)
        builder.problems.append(
            Problem(
                file,
                mark.line,
                mark.column,
                (),
                "the file holds more than one YAML document",
                "keep one cluster per file; remove the '---' separator",
            )
        )
    if builder.problems:
        raise SpecError(builder.problems)
    for path, mark in builder.value_log:
        source.values.setdefault(path, mark)
    for path, mark in builder.key_log:
        source.keys.setdefault(path, mark)
    return Document(data=data, source=source)


def _next_document(events: Iterator[Event]) -> Event | None:
    """The first node of a further document, if the stream holds one."""
    for event in events:
        if isinstance(event, DocumentStartEvent):
            continue
        if isinstance(event, (ScalarEvent, MappingStartEvent, SequenceStartEvent, AliasEvent)):
            return event
    return None
