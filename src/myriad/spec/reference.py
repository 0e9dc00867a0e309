"""The reference an operator reads, generated from the code: every spec field, every lint rule.

`python -m myriad.spec.reference [--out DIR]` writes `DIR/spec-reference.md` (every section
of the spec and each of its fields: type, allowed values, default, description) from the
JSON Schema of `Cluster`, and `DIR/lint-rules.md` from `rules.RULES`; DIR is `docs` unless
given. The Markdown comes from pure functions of the schema and the rules, so a test can
regenerate both and hold the committed files to them.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic.json_schema import GenerateJsonSchema, NoDefault
from pydantic_core import core_schema

from myriad.spec.models import Cluster
from myriad.spec.rules import RULES, Rule

REGENERATE = "python -m myriad.spec.reference"
SPEC_REFERENCE = "spec-reference.md"
LINT_RULES = "lint-rules.md"
Schema = Mapping[str, Any]


class _WithFactoryDefaults(GenerateJsonSchema):
    """The schema with the defaults of `default_factory` fields too (pydantic leaves them
    out; `get_default_value` is its documented place to add them), so the reference shows
    what an absent `monitoring:` or `health.counters` means."""

    def get_default_value(self, schema: core_schema.WithDefaultSchema) -> Any:
        factory = schema.get("default_factory")
        if factory is not None and not schema.get("default_factory_takes_data"):
            return factory()  # type: ignore[call-arg]
        return schema.get("default", NoDefault)


def reference_schema() -> dict[str, Any]:
    return Cluster.model_json_schema(by_alias=True, schema_generator=_WithFactoryDefaults)


@dataclass(frozen=True, slots=True)
class Section:
    """One model of the schema and every place in a spec it appears."""

    model: str
    paths: list[str] = field(default_factory=list)


def _ref_name(ref: str) -> str:
    return ref.rsplit("/", 1)[-1]


def _children(prop: Schema, path: str) -> Iterator[tuple[str, str]]:
    """(model, path) for each model a property holds, through lists, maps and options."""
    if "$ref" in prop:
        yield _ref_name(prop["$ref"]), path
    for option in prop.get("anyOf", ()):
        yield from _children(option, path)
    if isinstance(prop.get("items"), Mapping):
        yield from _children(prop["items"], f"{path}[]")
    if isinstance(prop.get("additionalProperties"), Mapping):
        yield from _children(prop["additionalProperties"], f"{path}.<name>")
    for value in prop.get("patternProperties", {}).values():
        yield from _children(value, f"{path}.<name>")


def model_sections(schema: Schema) -> list[Section]:
    """Every model once, in the order a reader meets them (depth first, file order); a
    model used in several places lists each of them."""
    defs = schema.get("$defs", {})
    root = Section(schema["title"], [""])
    sections = {root.model: root}

    def visit(model: Schema, path: str) -> None:
        for name, prop in model.get("properties", {}).items():
            for child, where in _children(prop, f"{path}.{name}" if path else name):
                if child in sections:
                    sections[child].paths.append(where)
                    continue
                sections[child] = Section(child, [where])
                visit(defs[child], where)

    visit(schema, "")
    return list(sections.values())


def _anchor(path: str) -> str:
    """The id GitHub gives a heading `## `path``: lower case, punctuation dropped."""
    return re.sub(r"[^a-z0-9 _-]", "", path.lower()).replace(" ", "-")


def _code(value: Any) -> str:
    return f"`{json.dumps(value, ensure_ascii=False)}`"


def _number(value: float) -> str:
    """1000000.0 → 1,000,000 and 1.0 → 1; 0.5 stays 0.5."""
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    return f"{value:,}"


def _count(low: int | None, high: int | None, what: str) -> str:
    if low and high:
        return f"{low:,} to {high:,} {what}"
    if low == 1:
        return "not empty"
    return f"at least {low:,} {what}" if low else f"at most {high:,} {what}"


def _bounds(prop: Schema) -> str:
    marks = (
        ("exclusiveMinimum", ">"),
        ("minimum", "≥"),
        ("exclusiveMaximum", "<"),
        ("maximum", "≤"),
    )
    parts = [f"{sign} {_number(prop[key])}" for key, sign in marks if key in prop]
    for low, high, what in (
        ("minLength", "maxLength", "characters"),
        ("minItems", "maxItems", "entries"),
        ("minProperties", "maxProperties", "entries"),
    ):
        if low in prop or high in prop:
            parts.append(_count(prop.get(low), prop.get(high), what))
    if "pattern" in prop:
        parts.append(f"matching `{prop['pattern']}`")
    return ", ".join(parts)


def _type_text(prop: Schema, links: Mapping[str, str]) -> str:
    """What a value may be, in words: its type, allowed values and limits."""
    if "$ref" in prop:
        name = _ref_name(prop["$ref"])
        return f"[{name}](#{_anchor(links[name])})"
    if "anyOf" in prop:
        options = [o for o in prop["anyOf"] if o.get("type") != "null"]
        text = " or ".join(_type_text(o, links) for o in options)
        return f"{text} or null" if len(options) < len(prop["anyOf"]) else text
    if "const" in prop:
        return _code(prop["const"])
    if "enum" in prop:
        return "one of " + ", ".join(_code(v) for v in prop["enum"])
    kind = prop.get("type")
    if kind == "array":
        items = prop.get("items")
        text = f"list of {_type_text(items, links)}" if isinstance(items, Mapping) else "list"
    elif kind == "object":
        text = _map_text(prop, links)
    else:
        text = str(kind)
    bounds = _bounds(prop)
    return f"{text} ({bounds})" if bounds else text


def _map_text(prop: Schema, links: Mapping[str, str]) -> str:
    patterns = prop.get("patternProperties", {})
    if patterns:
        ((pattern, value),) = patterns.items()
        keys = f"name matching `{pattern}`"
    else:
        value = prop.get("additionalProperties")
        names = prop.get("propertyNames", {})
        keys = f"a key ({_type_text(names, links)})" if names else "name"
    if not isinstance(value, Mapping):
        return "map"
    return f"map of {keys} to {_type_text(value, links)}"


def _model_ref(prop: Schema) -> str | None:
    if "$ref" in prop:
        return _ref_name(prop["$ref"])
    refs = [_ref_name(o["$ref"]) for o in prop.get("anyOf", ()) if "$ref" in o]
    return refs[0] if len(refs) == 1 else None


def _default_text(name: str, prop: Schema, required: Sequence[str], defs: Schema) -> str:
    """A section's default says only where it differs from the defaults of its own fields."""
    if name in required:
        return "required"
    if "default" not in prop:
        return "optional"
    default = prop["default"]
    model = _model_ref(prop)
    if model is not None and isinstance(default, Mapping):
        fields = defs[model].get("properties", {})
        differ = {
            key: value
            for key, value in default.items()
            if key not in fields or fields[key].get("default", NoDefault) != value
        }
        return _code(differ) if differ else "each field's default"
    return _code(default)


def _cell(text: str) -> str:
    """A table cell: a `|` would end the cell, even inside a code span (GFM tables)."""
    return text.replace("|", "\\|").replace("\n", " ")


def _section_markdown(
    section: Section, model: Schema, links: Mapping[str, str], defs: Schema
) -> list[str]:
    first, *others = section.paths
    heading = f"`{first}`" if first else "The document"
    lines = [f"## {heading}", ""]
    lines.append(f"*{section.model}*" + (" (the top level of cluster.yaml)" if not first else ""))
    if others:
        lines[-1] += "; also at " + ", ".join(f"`{p}`" for p in others)
    lines.append("")
    if model.get("description") and first:
        lines += [" ".join(model["description"].split()), ""]
    lines += ["| field | type | default | description |", "|---|---|---|---|"]
    required = model.get("required", [])
    for name, prop in model.get("properties", {}).items():
        cells = (
            f"`{name}`",
            _type_text(prop, links),
            _default_text(name, prop, required, defs),
            " ".join(str(prop.get("description", "")).split()),
        )
        lines.append("| " + " | ".join(_cell(c) for c in cells) + " |")
    lines.append("")
    return lines


def spec_reference_markdown(schema: Schema | None = None) -> str:
    """Every section of the spec and each of its fields, as Markdown."""
    schema = schema if schema is not None else reference_schema()
    defs = schema.get("$defs", {})
    sections = model_sections(schema)
    links = {s.model: s.paths[0] or "The document" for s in sections}
    lines = [
        "# Spec reference",
        "",
        f"<!-- Generated by `{REGENERATE}` from the models in src/myriad/spec/; "
        "do not edit by hand. -->",
        "",
        "Every section of `cluster.yaml` and each of its fields: what a value may be, what an "
        "absent field means, and what it does. A path such as `profiles.<name>.nics.compute` "
        "names the section as it sits in the file (`<name>` stands for a key you choose, `[]` "
        "for each entry of a list). `myriad schema` prints the same as a JSON Schema, for "
        "editors; [lint-rules.md](lint-rules.md) lists what `myriad plan` checks beyond it.",
        "",
        "Values are strict: a number is never written in quotes, a version always is "
        '(`nvidia_driver: "580"`), `true`/`false` are the only booleans, and an unknown key is '
        "an error. *null* means the field is left out.",
        "",
        "Sections:",
        "",
    ]
    lines += [
        f"- [`{s.paths[0]}`](#{_anchor(s.paths[0])})"
        if s.paths[0]
        else "- [The document](#the-document)"
        for s in sections
    ]
    lines.append("")
    for section in sections:
        model = schema if section.model == schema["title"] else defs[section.model]
        lines += _section_markdown(section, model, links, defs)
    return "\n".join(lines).rstrip("\n") + "\n"


def _rule_markdown(rule: Rule) -> list[str]:
    accepted = (
        "a warning or note; **can be accepted** in the spec with a reason"
        if rule.acceptable
        else "an error; fixed, **never accepted**"
    )
    return [
        f"### `{rule.id}`",
        "",
        f"- **Kind**: {accepted}",
        f"- **Why**: {rule.why}",
        f"- **Fix**: {rule.fix}",
        "",
    ]


def lint_rules_markdown(rules: Mapping[str, Rule] = RULES) -> str:
    """Every plan lint by its id: whether it can be accepted, why it exists, how it is fixed."""
    lines = [
        "# Lint rules",
        "",
        f"<!-- Generated by `{REGENERATE}` from src/myriad/spec/rules.py; do not edit by hand. -->",
        "",
        "`myriad plan` checks the hardware choices of a spec against each other and the "
        "catalog; each finding names its rule. `myriad plan --explain RULE` prints one rule. "
        "An error stops `myriad up`; a warning or note the site has weighed is accepted in the "
        "spec with its reason, and the plan keeps showing it as accepted:",
        "",
        "```yaml",
        "lints:",
        "  accept:",
        "    - {rule: rack-cooling, reason: the hall has rear-door heat exchangers}",
        "```",
        "",
        "| rule | can be accepted |",
        "|---|---|",
    ]
    lines += [
        f"| [`{r.id}`](#{_anchor(r.id)}) | {'yes' if r.acceptable else 'no'} |"
        for r in rules.values()
    ]
    lines.append("")
    for rule in rules.values():
        lines += _rule_markdown(rule)
    return "\n".join(lines).rstrip("\n") + "\n"


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog=REGENERATE, description="write the spec and lint reference as Markdown"
    )
    parser.add_argument("--out", type=Path, default=Path("docs"), help="folder (default: docs)")
    args = parser.parse_args(argv)
    try:
        for name, text in (
            (SPEC_REFERENCE, spec_reference_markdown()),
            (LINT_RULES, lint_rules_markdown()),
        ):
            (args.out / name).write_text(text, encoding="utf-8")
            sys.stdout.write(f"wrote {args.out / name}\n")
    except OSError as exc:
        sys.stderr.write(f"{REGENERATE}: {args.out}: {exc.strerror}\n")
        return 2
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
