"""Entry point that `pulumi up` runs (Pulumi.yaml: `main: stacks/`)."""

import sys
from pathlib import Path

# Pulumi runs this folder as a script, so the repository root (which holds the `stacks`
# package) is not on the import path by itself.
_ROOT = str(Path(__file__).resolve().parents[1])
if _ROOT not in sys.path:
    sys.path.insert(0, _ROOT)

from stacks.program import main  # noqa: E402 - needs the path above

main()
