"""The cluster spec: models, YAML loading with locations, the hardware catalog."""

from myriad.errors import MyriadError, Problem, SpecError
from myriad.spec.loader import LoadedSpec, load_spec, load_spec_text, shipped_catalog
from myriad.spec.models import Cluster

__all__ = [
    "Cluster",
    "LoadedSpec",
    "MyriadError",
    "Problem",
    "SpecError",
    "load_spec",
    "load_spec_text",
    "shipped_catalog",
]
