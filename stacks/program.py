"""The program: pick the provider for the spec's kind, build this stack's scope, export `nodes`.

Providers are registered by kind and imported only when used, so that a baremetal stack does
not need the AWS SDK installed. A new provider is one module with a `build` function of the
`stacks.interface.ProviderBuild` shape, plus one line here.
"""

from __future__ import annotations

import importlib
from collections.abc import Mapping

import pulumi

from myriad.errors import MyriadError
from myriad.spec import SpecError, load_spec
from myriad.spec.models import Cluster
from stacks.interface import ProviderBuild, ProviderResult, StackError
from stacks.settings import NAMESPACE, PulumiConfig, StackSettings, read_settings, spec_path
from stacks.sharding import scope_for

PROVIDERS: Mapping[str, str] = {
    "aws": "stacks.aws",
    "baremetal": "stacks.baremetal",
}
WITHOUT_STACK: Mapping[str, str] = {
    "local": (
        "provider kind local has no Pulumi stack: its nodes are containers on this machine; "
        "start them with `myriad up <cluster.yaml>` instead of `pulumi up`"
    ),
}


def provider_build(kind: str) -> ProviderBuild:
    if kind in WITHOUT_STACK:
        raise StackError(WITHOUT_STACK[kind])
    module_name = PROVIDERS.get(kind)
    if module_name is None:
        raise StackError(
            f"no Pulumi provider module for kind {kind} (known: {', '.join(PROVIDERS)})"
        )
    try:
        module = importlib.import_module(module_name)
    except ModuleNotFoundError as exc:
        raise StackError(
            f"provider {kind} needs the Python package {exc.name}; install Myriad's extra for it "
            f"(pip install 'myriad-cluster[{'aws' if kind == 'aws' else 'provision'}]')"
        ) from exc
    build: ProviderBuild = module.build
    return build


def build(spec: Cluster, settings: StackSettings) -> ProviderResult:
    """Create this stack's resources for `spec`; what tests call under Pulumi mocks."""
    scope = scope_for(spec, settings.island)
    return provider_build(spec.provider.kind)(spec, scope, settings)


def export(result: ProviderResult) -> None:
    pulumi.export("nodes", result.nodes)
    for name, value in result.outputs.items():
        pulumi.export(name, value)


def main() -> None:
    config = pulumi.Config(NAMESPACE)
    try:
        path = spec_path(PulumiConfig(config))
        spec = load_spec(path).spec
        settings = read_settings(config, spec, path)
        export(build(spec, settings))
    except SpecError as exc:
        raise pulumi.RunError(exc.render()) from None
    except MyriadError as exc:
        # RunError is reported without a Python traceback: the message is the whole story.
        raise pulumi.RunError(str(exc)) from None
