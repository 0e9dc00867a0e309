"""Load a cluster spec: YAML with locations → strict models → cross-references.

Every problem of a file is collected and raised together as one `SpecError`, each with
`file:line:col`, the path inside the spec, what is wrong and what would be right.
"""

from __future__ import annotations

import difflib
import re
import types
import typing
from dataclasses import dataclass
from functools import cache
from importlib import resources
from pathlib import Path as FsPath
from typing import Any, TypeVar

from pydantic import BaseModel, ValidationError
from pydantic_core import ErrorDetails

from myriad.errors import Path, Problem, SpecError
from myriad.spec.catalog_models import Catalog
from myriad.spec.models import Cluster
from myriad.spec.references import reference_problems
from myriad.spec.yaml_source import Document, SourceMap, parse_document

M = TypeVar("M", bound=BaseModel)


@dataclass(frozen=True, slots=True)
class LoadedSpec:
    """A valid spec, the catalog it resolves against, and where each value came from."""

    spec: Cluster
    catalog: Catalog
    source: SourceMap


def read_text(file: FsPath) -> str:
    try:
        raw = file.read_bytes()
    except FileNotFoundError:
        raise SpecError([Problem(str(file), 1, 1, (), "no such file")]) from None
    except IsADirectoryError:
        raise SpecError(
            [Problem(str(file), 1, 1, (), "this is a directory", "name its cluster.yaml")]
        ) from None
    except OSError as exc:
        raise SpecError([Problem(str(file), 1, 1, (), f"cannot read: {exc.strerror}")]) from None
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = raw[: exc.start].count(b"\n") + 1
        raise SpecError(
            [Problem(str(file), line, 1, (), "the file is not UTF-8 text", "save it as UTF-8")]
        ) from None


def load_spec(file: str | FsPath) -> LoadedSpec:
    file = FsPath(file)
    return load_spec_text(read_text(file), str(file))


def load_spec_text(text: str, file: str = "<spec>") -> LoadedSpec:
    document = parse_document(text, file)
    problems = reference_problems(document.data, shipped_catalog(), document.source)
    try:
        spec = _validate(Cluster, document)
    except SpecError as exc:
        raise SpecError([*exc.problems, *problems]) from None
    if problems:
        raise SpecError(problems)
    catalog = shipped_catalog().merged_with(spec.catalog)
    return LoadedSpec(spec=spec, catalog=catalog, source=document.source)


@cache
def shipped_catalog() -> Catalog:
    ref = resources.files("myriad") / "catalog" / "hardware.yaml"
    document = parse_document(ref.read_text(encoding="utf-8"), str(ref))
    return _validate(Catalog, document)


def _validate(model: type[M], document: Document) -> M:
    try:
        return model.model_validate(document.data)
    except ValidationError as exc:
        errors = exc.errors()
        raise SpecError(
            [
                _problem_from(error, model, document.source)
                for error in errors
                if not _caused_by_its_items(error, errors)
            ]
        ) from None


def _caused_by_its_items(error: ErrorDetails, errors: list[ErrorDetails]) -> bool:
    """'too short' on a list whose items failed repeats those failures; leave it out."""
    if not error["type"].endswith("too_short"):
        return False
    loc = error["loc"]
    return any(len(e["loc"]) > len(loc) and e["loc"][: len(loc)] == loc for e in errors)


# --- turning pydantic's errors into messages a cluster operator can act on ---------------

_TYPE_WORDS = {
    "int_type": "a whole number",
    "int_from_float": "a whole number",
    "float_type": "a number",
    "string_type": "a string",
    "bool_type": "true or false",
    "dict_type": "a mapping (key: value lines)",
    "model_type": "a mapping (key: value lines)",
    "model_attributes_type": "a mapping (key: value lines)",
    "list_type": "a list",
    "tuple_type": "a list",
}

_PATTERN_HINTS = {
    "^[a-z][a-z0-9-]{0,30}[a-z0-9]$|^[a-z]$": (
        "a name: lowercase letters, digits and '-', starting with a letter, at most 32 long"
    ),
    r"^\d+(\.\d+){0,3}$": 'a version such as "550" or "550.127.05"',
    r"^NCCL_[A-Z0-9_]+$": "an NCCL variable name such as NCCL_IB_QPS_PER_CONNECTION",
    r"^([0-9a-f]{2}:){5}[0-9a-f]{2}$": "a MAC address in lowercase, such as 0c:42:a1:00:00:01",
    r"^0x[0-9a-fA-F]{1,4}$": "a partition key such as 0x7fff",
    r"^/\S*$": "an absolute path without spaces, such as /data",
    r"^\d+\.\d+(\.\d+)?-[0-9A-Za-z][0-9A-Za-z.+~-]*$": (
        "a kernel release as `uname -r` prints it, such as 6.8.0-51-generic"
    ),
}


_BOUND_WORDS = {
    "greater_than": "greater than",
    "greater_than_equal": "at least",
    "less_than": "less than",
    "less_than_equal": "at most",
}


def _number(value: Any) -> str:
    """1,000,000 rather than 1000000: a limit and a typo are easier to compare so."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return str(value)
    return f"{value:,}" if isinstance(value, int) else f"{value:,g}"


def _describe(value: Any) -> str:
    if isinstance(value, bool):
        return f"boolean {str(value).lower()}"
    if isinstance(value, int):
        return f"number {value}"
    if isinstance(value, float):
        # repr, not :g: "2048.0" must not read back as the whole number 2048.
        return f"number {value!r}"
    if isinstance(value, str):
        return f"string {value!r}"
    if value is None:
        return "nothing (null)"
    if isinstance(value, dict):
        return "a mapping"
    if isinstance(value, (list, tuple)):
        return "a list"
    return type(value).__name__


def _problem_from(error: ErrorDetails, model: type[BaseModel], source: SourceMap) -> Problem:
    path: Path = tuple(error["loc"])
    kind = error["type"]
    value = error.get("input")
    message, hint = error["msg"], ""

    if kind == "missing":
        message = f"required field '{path[-1]}' is missing"
        hint = _field_hint(model, path)
    elif kind == "extra_forbidden":
        known = _field_names(model, path[:-1])
        message = f"unknown field '{path[-1]}'"
        hint = _did_you_mean(str(path[-1]), known) or (
            f"known fields: {', '.join(sorted(known))}" if known else ""
        )
    elif kind in _TYPE_WORDS:
        message = f"expected {_TYPE_WORDS[kind]}, got {_describe(value)}"
        hint = _type_hint(kind, value)
    elif kind == "literal_error":
        expected = error.get("ctx", {}).get("expected", "")
        message, hint = _literal_problem(value, expected)
    elif kind == "string_pattern_mismatch":
        pattern = error.get("ctx", {}).get("pattern", "")
        message = f"{_describe(value)} is not valid here"
        hint = f"expected {_PATTERN_HINTS.get(pattern, f'text matching {pattern}')}"
    elif kind in ("value_error", "assertion_error"):
        message = str(error.get("ctx", {}).get("error", message))
    elif kind in _BOUND_WORDS:
        (bound,) = error.get("ctx", {}).values() or (message,)
        message = f"must be {_BOUND_WORDS[kind]} {_number(bound)}, got {_number(value)}"
        hint = _field_description(model, path)
    elif kind.endswith("_too_short"):
        message = message.replace("Input should", "must").replace("Tuple should", "must")
    if path and path[-1] == "[key]":
        path = path[:-1]
        message = f"the key {path[-1]!r} is not valid"
    return source.problem(path, message, hint)


_DECIMAL_COMMA = re.compile(r"^[-+]?[0-9]+,[0-9]+$")
_THOUSANDS = re.compile(r"^[-+]?[0-9]{1,3}(,[0-9]{3})+$")


def _literal_problem(value: Any, expected: str) -> tuple[str, str]:
    """A value outside a fixed set of choices, with a hint that is itself accepted."""
    message = f"{_describe(value)} is not one of {expected}"
    parts = [c.strip() for c in expected.replace(" or ", ",").split(",") if c.strip()]
    # pydantic quotes string choices ('roce') and writes numbers bare (8).
    words = [c.strip("'") for c in parts if c.startswith("'")]
    numbers = [c for c in parts if not c.startswith("'")]
    if isinstance(value, str) and value.strip() in numbers:
        return (
            f"expected the number {value.strip()}, got string {value!r}",
            f"write {value.strip()} without quotes",
        )
    if isinstance(value, float) and value.is_integer() and str(int(value)) in numbers:
        return f"expected a whole number, got number {value!r}", f"write {int(value)}"
    if isinstance(value, (int, float)) and not isinstance(value, bool) and f"{value:g}" in words:
        return message, f'quote it: "{value:g}"'
    word = _did_you_mean(str(value), words)
    if word:
        return message, word
    close = difflib.get_close_matches(str(value), numbers, n=1, cutoff=0.6)
    return message, f"did you mean {close[0]}?" if close else ""


def _type_hint(kind: str, value: Any) -> str:
    if kind in ("int_type", "float_type", "int_from_float") and isinstance(value, str):
        text = value.strip()
        if kind == "float_type" and _DECIMAL_COMMA.match(text):
            return f"write {text.replace(',', '.')}: a decimal comma makes it text"
        if _THOUSANDS.match(text) or (kind != "float_type" and _DECIMAL_COMMA.match(text)):
            return f"write {text.replace(',', '')}: digit separators make it text"
    if kind in ("int_type", "int_from_float") and isinstance(value, float):
        if value.is_integer():
            return f"write {int(value)}, without the decimal point"
        return "use a whole number"
    if kind == "string_type" and isinstance(value, (int, float)) and not isinstance(value, bool):
        return (
            f'YAML read this as a number; quote it: "{value:g}"'
            if isinstance(value, float)
            else f'YAML read this as a number; quote it: "{value}"'
        )
    if kind == "bool_type" and isinstance(value, str):
        return "write true or false (yes/no/on/off are not booleans in a spec)"
    if kind in ("int_type", "float_type", "int_from_float") and isinstance(value, str):
        return "write the number without quotes"
    return ""


def _did_you_mean(word: str, choices: typing.Iterable[str]) -> str:
    choices = list(choices)
    lowered = {c.lower(): c for c in choices}
    match = difflib.get_close_matches(word.lower(), list(lowered), n=1, cutoff=0.6)
    return f"did you mean '{lowered[match[0]]}'?" if match else ""


def _unwrap(annotation: Any) -> Any:
    """The model (or container) inside Optional[...] / Annotated[...]."""
    origin = typing.get_origin(annotation)
    if origin is typing.Annotated:
        return _unwrap(typing.get_args(annotation)[0])
    if origin in (typing.Union, types.UnionType):
        members = [a for a in typing.get_args(annotation) if a is not type(None)]
        return _unwrap(members[0]) if len(members) == 1 else annotation
    return annotation


def _model_at(model: Any, path: Path) -> type[BaseModel] | None:
    current = model
    for part in path:
        current = _unwrap(current)
        origin = typing.get_origin(current)
        if isinstance(current, type) and issubclass(current, BaseModel):
            field = _field_by_name(current, str(part))
            if field is None:
                return None
            current = field.annotation
        elif origin is dict:
            current = typing.get_args(current)[1]
        elif origin in (tuple, list):
            current = typing.get_args(current)[0]
        else:
            return None
    current = _unwrap(current)
    return current if isinstance(current, type) and issubclass(current, BaseModel) else None


def _field_by_name(model: type[BaseModel], name: str) -> Any:
    for field_name, field in model.model_fields.items():
        if name in (field_name, field.alias):
            return field
    return None


def _field_names(model: type[BaseModel], path: Path) -> list[str]:
    found = _model_at(model, path)
    if found is None:
        return []
    return [field.alias or name for name, field in found.model_fields.items()]


def _field_description(model: type[BaseModel], path: Path) -> str:
    parent = _model_at(model, path[:-1]) if path else None
    field = _field_by_name(parent, str(path[-1])) if parent is not None else None
    return (field.description or "") if field is not None else ""


def _field_hint(model: type[BaseModel], path: Path) -> str:
    parent = _model_at(model, path[:-1])
    if parent is None:
        return ""
    field = _field_by_name(parent, str(path[-1]))
    if field is None or not field.description:
        return f"add {path[-1]}: ..."
    return f"add {path[-1]}: ({field.description})"
