"""docs/troubleshooting.md quotes only messages Myriad really prints, and the README links the
reference docs from its spec section."""

from __future__ import annotations

import ast
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs"
SRC = ROOT / "src"


def _literals() -> list[str]:
    """Every string literal of src/, adjacent literals joined and f-strings cut at their
    fields, as Python's parser sees them."""
    found: list[str] = []
    for path in SRC.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Constant) and isinstance(node.value, str):
                found.append(node.value)
    return found


def test_troubleshooting_quotes_only_messages_the_code_prints() -> None:
    """Each `> ` line of the page is a message as Myriad prints it, `…` standing for what
    the message fills in; every stretch between those is literal text of src/."""
    page = (DOCS / "troubleshooting.md").read_text(encoding="utf-8")
    quotes = re.findall(r"^> (.+)$", page, flags=re.MULTILINE)
    assert len(quotes) >= 10
    literals = _literals()
    for quote in quotes:
        for piece in quote.split("…"):
            piece = piece.strip()
            if len(piece) >= 8:
                assert any(piece in text for text in literals), (
                    f"troubleshooting.md quotes {piece!r}, which no string in src/ holds"
                )


def test_readme_links_the_reference() -> None:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    for doc in ("docs/spec-reference.md", "docs/lint-rules.md", "docs/troubleshooting.md"):
        assert f"({doc})" in readme
