"""The real captures in tests/samples are the ones their provenance file names, unchanged.

SOURCES.md says where each capture came from; SHA256SUMS pins its bytes. A capture edited,
added or dropped without updating both would detach it from its source, so every file must
be listed with a matching checksum and every listed file must exist.
"""

from __future__ import annotations

import hashlib
from pathlib import Path

SAMPLES = Path(__file__).resolve().parents[1] / "samples"
PROVENANCE = {"SHA256SUMS", "SOURCES.md"}


def _listed() -> dict[str, str]:
    sums: dict[str, str] = {}
    for number, line in enumerate((SAMPLES / "SHA256SUMS").read_text().splitlines(), 1):
        digest, _, name = line.partition("  ")
        assert len(digest) == 64 and name, f"SHA256SUMS:{number}: not '<sha256>  <path>': {line!r}"
        sums[name] = digest
    return sums


def test_every_capture_matches_its_checksum() -> None:
    listed = _listed()
    present = {
        path.relative_to(SAMPLES).as_posix()
        for path in SAMPLES.rglob("*")
        if path.is_file() and path.name not in PROVENANCE
    }
    assert present - listed.keys() == set(), "captures without a checksum in SHA256SUMS"
    assert listed.keys() - present == set(), "SHA256SUMS lists captures that are missing"
    changed = [
        name
        for name, digest in listed.items()
        if hashlib.sha256((SAMPLES / name).read_bytes()).hexdigest() != digest
    ]
    assert changed == [], "captures whose bytes differ from SHA256SUMS"


def test_every_capture_folder_has_a_source() -> None:
    sources = (SAMPLES / "SOURCES.md").read_text()
    folders = {name.split("/", 1)[0] for name in _listed()}
    missing = sorted(folder for folder in folders if f"| {folder}/" not in sources)
    assert missing == [], f"capture folders with no row in SOURCES.md: {missing}"
