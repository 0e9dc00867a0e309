"""`myriad image build` on a terminal: one row per profile, built this run or current, then
where the records are."""

from __future__ import annotations

from rich.console import Console
from rich.table import Table

from myriad.bringup.images import ImageBuildResult


def print_image_build(console: Console, result: ImageBuildResult) -> None:
    table = Table(title=f"Node images of {result.cluster}", title_justify="left")
    for column in ("profile", "image", "content hash", "this run", "packages", "file"):
        table.add_column(column)
    for profile, outcome in result.images.items():
        manifest = outcome.manifest
        carried = result.file(outcome)
        table.add_row(
            profile,
            manifest.tag,
            manifest.content_hash[:12],
            f"built ({outcome.seconds:.0f} s)" if outcome.built else "current, not rebuilt",
            str(len(manifest.packages)) if manifest.packages else "-",
            "-" if carried is None else str(carried),
        )
    console.print(table)
    console.print(f"records: {result.records}/<profile>.json", markup=False)
