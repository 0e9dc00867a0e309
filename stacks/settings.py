"""The stack's configuration, read in one place; every key is in namespace `myriad`.

Pulumi.<env>.yaml holds the plain ones; the BMC credentials are a secret set with
`pulumi config set --secret`. stacks/README.md lists every key with its default.
"""

from __future__ import annotations

import ipaddress
import json
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol, TypeVar

import pulumi
import yaml

from myriad.spec.models import Cluster
from stacks.interface import StackError

T = TypeVar("T")
NAMESPACE = "myriad"
PROJECT_ROOT = Path(__file__).resolve().parents[1]
_PUBLIC_KEY = re.compile(
    r"^(ssh-(ed25519|rsa)|ecdsa-sha2-nistp(256|384|521)|sk-[a-z0-9@.-]+) [A-Za-z0-9+/]+=*( .*)?$"
)


class ConfigSource(Protocol):
    """Typed reads of plain (non-secret) config keys; None when the key is not set."""

    def get_str(self, key: str) -> str | None: ...
    def get_int(self, key: str) -> int | None: ...
    def get_float(self, key: str) -> float | None: ...
    def get_bool(self, key: str) -> bool | None: ...
    def get_list(self, key: str) -> list[Any] | None: ...


class PulumiConfig:
    """The running stack's config."""

    def __init__(self, config: pulumi.Config) -> None:
        self.config = config

    def get_str(self, key: str) -> str | None:
        return self.config.get(key)

    def get_int(self, key: str) -> int | None:
        return self._typed(self.config.get_int, key)

    def get_float(self, key: str) -> float | None:
        return self._typed(self.config.get_float, key)

    def get_bool(self, key: str) -> bool | None:
        return self._typed(self.config.get_bool, key)

    def get_list(self, key: str) -> list[Any] | None:
        value = self._typed(self.config.get_object, key)
        if value is not None and not isinstance(value, list):
            raise StackError(f"{NAMESPACE}:{key} must be a list")
        return value

    @staticmethod
    def _typed(read: Callable[[str], T], key: str) -> T:
        try:
            return read(key)
        except pulumi.ConfigTypeError as exc:
            raise StackError(str(exc)) from None


class StackFileConfig:
    """Plain keys as a Pulumi.<env>.yaml holds them, for tools that run outside `pulumi up`."""

    def __init__(self, values: Mapping[str, Any], origin: str = "stack config") -> None:
        prefix = f"{NAMESPACE}:"
        self.origin = origin
        self.values = {k[len(prefix) :]: v for k, v in values.items() if k.startswith(prefix)}

    @classmethod
    def read(cls, path: Path) -> StackFileConfig:
        try:
            document = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
        except FileNotFoundError:
            raise StackError(f"{path}: no such stack file") from None
        except (OSError, yaml.YAMLError) as exc:
            raise StackError(f"{path}: cannot read: {exc}") from None
        config = document.get("config", {}) if isinstance(document, Mapping) else {}
        if not isinstance(config, Mapping):
            raise StackError(f"{path}: `config` must be a mapping")
        return cls(config, str(path))

    def _get(self, key: str, kind: type | tuple[type, ...], what: str) -> Any:
        value = self.values.get(key)
        if value is None:
            return None
        if isinstance(value, Mapping) and "secure" in value:
            raise StackError(f"{self.origin}: {NAMESPACE}:{key} is a secret; only pulumi reads it")
        if isinstance(value, bool) and kind is not bool:
            raise StackError(f"{self.origin}: {NAMESPACE}:{key} must be {what}")
        if not isinstance(value, kind):
            raise StackError(f"{self.origin}: {NAMESPACE}:{key} must be {what}, not {value!r}")
        return value

    def get_str(self, key: str) -> str | None:
        value = self._get(key, str, "a string")
        return None if value is None else str(value)

    def get_int(self, key: str) -> int | None:
        value = self._get(key, int, "an integer")
        return None if value is None else int(value)

    def get_float(self, key: str) -> float | None:
        value = self._get(key, (int, float), "a number")
        return None if value is None else float(value)

    def get_bool(self, key: str) -> bool | None:
        value = self._get(key, bool, "true or false")
        return None if value is None else bool(value)

    def get_list(self, key: str) -> list[Any] | None:
        value = self._get(key, list, "a list")
        return None if value is None else list(value)


@dataclass(frozen=True)
class PxeSettings:
    """The PXE server's side of a bare-metal environment."""

    server: str
    gateway: str
    dns: tuple[str, ...]
    ssh_authorized_keys: tuple[str, ...]
    http_port: int = 80
    interface: str | None = None
    domain: str | None = None
    admin_user: str = "myriad"
    tftp_root: str = "/srv/tftp"
    # Install media (the live ISO, kernel, initrd, image archives) come from a web server that
    # sends files with sendfile (the bundle's nginx.conf), not the Python server; a rack
    # cache at another address takes `media_host`.
    media_port: int = 8080
    media_host: str | None = None
    # Image mode's seeds over TLS: the PXE server's TLS port and its CA certificate (PEM),
    # which the installer checks the server against. None: seeds over plain HTTP.
    tls_port: int = 8443
    tls_ca: str | None = None

    @property
    def http_base(self) -> str:
        port = "" if self.http_port == 80 else f":{self.http_port}"
        return f"http://{self.server}{port}"

    @property
    def seed_base(self) -> str:
        """Where installers fetch seeds: the TLS listener when there is a CA, else HTTP."""
        return f"https://{self.server}:{self.tls_port}" if self.tls_ca else self.http_base

    @property
    def media_base(self) -> str:
        port = "" if self.media_port == 80 else f":{self.media_port}"
        return f"http://{self.media_host or self.server}{port}"


@dataclass(frozen=True)
class StackSettings:
    spec_path: Path
    island: int | None = None
    shared_stack: str | None = None
    ssh_authorized_keys: tuple[str, ...] = ()
    bmc_credentials: pulumi.Output[Any] | None = None
    bmc_verify_tls: bool = True
    bmc_ca_file: str | None = None
    power_timeout_s: float = 600.0
    request_timeout_s: float = 30.0
    protect_nodes: bool = True
    retain_nodes: bool = True
    pxe: PxeSettings | None = None
    # baremetal: the PXE server's folder (bundle + install state) on the host running Pulumi.
    pxe_root: str = "/srv/myriad-pxe"
    # aws: node name (or island-<n>) -> token; a new token replaces that node (or island).
    replace: Mapping[str, str] = field(default_factory=dict)
    # aws: node name (or island-<n>) -> the launch template version it launches with (1 when
    # unset); a new version replaces that node (or island) with the template's new inputs.
    template_versions: Mapping[str, int] = field(default_factory=dict)
    # aws: Pulumi `protect` on FSx for Lustre (`pulumi destroy` refuses while it is set).
    protect_storage: bool = True
    # baremetal, image mode: the cluster's state folder (its images/ and seeds/).
    state_dir: Path | None = None


def spec_path(source: ConfigSource) -> Path:
    """`myriad:spec`, relative to the project root (where Pulumi.yaml is) unless absolute."""
    value = source.get_str("spec")
    if not value:
        raise StackError(
            f"{NAMESPACE}:spec is not set; name the environment's cluster.yaml, e.g. "
            "`pulumi config set myriad:spec inventories/<env>/cluster.yaml`"
        )
    path = Path(value)
    return path if path.is_absolute() else PROJECT_ROOT / path


def spec_source(path: Path) -> str:
    """How files rendered from the spec name it: relative to the project root where possible."""
    return str(path.relative_to(PROJECT_ROOT)) if path.is_relative_to(PROJECT_ROOT) else str(path)


def read_settings(config: pulumi.Config, spec: Cluster, path: Path) -> StackSettings:
    source = PulumiConfig(config)
    credentials = None
    if spec.provider.kind == "baremetal" and spec.provider.bmc_credentials_secret:
        credentials = _bmc_credentials(config, spec.provider.bmc_credentials_secret)
    island = source.get_int("island")
    if island is not None and island < 0:
        raise StackError(f"{NAMESPACE}:island must be 0 or more, not {island}")
    return StackSettings(
        spec_path=path,
        island=island,
        shared_stack=source.get_str("sharedStack"),
        ssh_authorized_keys=ssh_keys(source),
        bmc_credentials=credentials,
        bmc_verify_tls=_default(source.get_bool("bmcVerifyTls"), True),
        bmc_ca_file=source.get_str("bmcCaFile"),
        power_timeout_s=_positive(source, "powerTimeoutSeconds", 600.0),
        request_timeout_s=_positive(source, "requestTimeoutSeconds", 30.0),
        protect_nodes=_default(source.get_bool("protectNodes"), True),
        retain_nodes=_default(source.get_bool("retainNodes"), True),
        pxe=pxe_settings(source, spec) if spec.provider.kind == "baremetal" else None,
        pxe_root=pxe_root(source),
        replace=replace_tokens(PulumiConfig._typed(config.get_object, "replace")),
        template_versions=template_versions(
            PulumiConfig._typed(config.get_object, "templateVersions")
        ),
        protect_storage=_default(source.get_bool("protectStorage"), True),
        state_dir=(
            state_folder(source, spec.metadata.name)
            if spec.provider.kind in ("baremetal", "aws")
            else None
        ),
    )


def state_folder(source: ConfigSource, cluster: str) -> Path:
    """`myriad:stateDir`, else Myriad's state folder of `cluster` (nothing is created)."""
    value = source.get_str("stateDir")
    if value:
        if not Path(value).is_absolute():
            raise StackError(f"{NAMESPACE}:stateDir must be an absolute path, not {value!r}")
        return Path(value)
    # Deferred: only image mode reads the state folder, and only this needs the bring-up.
    from myriad.bringup.flow import state_base

    return state_base() / cluster


def replace_tokens(value: Any) -> dict[str, str]:
    """`myriad:replace`: {node or island-<n>: token}; changing a token replaces that machine."""
    if value is None:
        return {}
    if not isinstance(value, Mapping) or not all(
        isinstance(k, str) and isinstance(v, str | int) and not isinstance(v, bool)
        for k, v in value.items()
    ):
        raise StackError(
            f"{NAMESPACE}:replace must map node names (or island-<n>) to tokens, e.g. "
            f"`pulumi config set --path '{NAMESPACE}:replace.gpu01' 2026-12-01`"
        )
    return {k: str(v) for k, v in value.items()}


def template_versions(value: Any) -> dict[str, int]:
    """`myriad:templateVersions`: {node or island-<n>: launch template version, 1 or more}."""
    if value is None:
        return {}

    # `pulumi config set --path` may store the number as text: both are accepted.
    def number(v: Any) -> int | None:
        if isinstance(v, bool):
            return None
        if isinstance(v, str) and v.isdigit():
            v = int(v)
        return v if isinstance(v, int) and v >= 1 else None

    if not isinstance(value, Mapping) or not all(
        isinstance(k, str) and number(v) is not None for k, v in value.items()
    ):
        raise StackError(
            f"{NAMESPACE}:templateVersions must map node names (or island-<n>) to launch "
            f"template version numbers (1 or more), e.g. `pulumi config set --path "
            f"'{NAMESPACE}:templateVersions.island-0' 2`"
        )
    return {k: int(v) for k, v in value.items()}


def pxe_root(source: ConfigSource) -> str:
    """`myriad:pxeRoot`: where `python -m stacks.pxe --out` wrote the bundle; absolute."""
    value = _default(source.get_str("pxeRoot"), "/srv/myriad-pxe")
    if not Path(value).is_absolute():
        raise StackError(f"{NAMESPACE}:pxeRoot must be an absolute path, not {value!r}")
    return value


def _bmc_credentials(config: pulumi.Config, name: str) -> pulumi.Output[Any]:
    key = f"{NAMESPACE}:{name}"
    # Read as text and parsed here: the SDK's own JSON error would quote the secret value.
    try:
        secret = config.require_secret(name)
    except pulumi.ConfigMissingError:
        raise StackError(
            f"{key} is not set: it holds the BMC credentials the spec's bmc_credentials_secret "
            f"names; set it with `pulumi config set --secret --path '{key}.username' ...` and "
            f"`pulumi config set --secret --path '{key}.password' ...`"
        ) from None

    def checked(value: Any) -> dict[str, str]:
        if isinstance(value, str):
            try:
                value = json.loads(value)
            except ValueError:
                value = None
        if not (
            isinstance(value, Mapping)
            and isinstance(value.get("username"), str)
            and isinstance(value.get("password"), str)
            and value["username"]
            and value["password"]
        ):
            raise StackError(f"{key} must be a secret object with username and password")
        return {"username": value["username"], "password": value["password"]}

    return pulumi.Output.secret(secret.apply(checked))


def ssh_keys(source: ConfigSource) -> tuple[str, ...]:
    keys = source.get_list("sshAuthorizedKeys") or []
    for index, key in enumerate(keys):
        where = f"{NAMESPACE}:sshAuthorizedKeys[{index}]"
        if not isinstance(key, str):
            raise StackError(f"{where} must be a public key line such as 'ssh-ed25519 AAAA...'")
        if "PRIVATE KEY" in key:
            raise StackError(f"{where} is a private key; give the public key (the .pub file)")
        if not _PUBLIC_KEY.match(key.strip()):
            raise StackError(f"{where} is not an OpenSSH public key line ('ssh-ed25519 AAAA...')")
    return tuple(key.strip() for key in keys)


def pxe_settings(source: ConfigSource, spec: Cluster) -> PxeSettings:
    network = ipaddress.ip_network(spec.network.addressing.management)
    server = _address(source, "pxeServer", network, required=True)
    assert server is not None  # required=True raises instead
    gateway = _address(source, "gateway", network, required=False) or str(next(network.hosts()))
    dns = tuple(
        _ipv4(value, f"{NAMESPACE}:dnsServers") for value in source.get_list("dnsServers") or ()
    )
    keys = ssh_keys(source)
    if not keys:
        raise StackError(
            f"{NAMESPACE}:sshAuthorizedKeys is empty: installed nodes would accept no SSH key; "
            f"set it with `pulumi config set --path '{NAMESPACE}:sshAuthorizedKeys[0]' "
            '"$(cat ~/.ssh/id_ed25519.pub)"`'
        )
    port = _default(source.get_int("pxeHttpPort"), 80)
    if not 0 < port < 65536:
        raise StackError(f"{NAMESPACE}:pxeHttpPort must be a TCP port, not {port}")
    tls_port = _default(source.get_int("pxeTlsPort"), 8443)
    if not 0 < tls_port < 65536 or tls_port == port:
        raise StackError(
            f"{NAMESPACE}:pxeTlsPort must be a TCP port other than pxeHttpPort, not {tls_port}"
        )
    tls_ca = _read_ca(source.get_str("pxeTlsCaFile"))
    media_port = _default(source.get_int("pxeMediaPort"), 8080)
    if not 0 < media_port < 65536 or (media_port == port and not source.get_str("pxeMediaHost")):
        raise StackError(
            f"{NAMESPACE}:pxeMediaPort must be a TCP port other than pxeHttpPort ({port}), "
            f"not {media_port}: the media web server and the PXE server both listen there"
        )
    return PxeSettings(
        server=server,
        gateway=gateway,
        dns=dns or (gateway,),
        ssh_authorized_keys=keys,
        http_port=port,
        media_port=media_port,
        media_host=source.get_str("pxeMediaHost"),
        tls_port=tls_port,
        tls_ca=tls_ca,
        interface=source.get_str("pxeInterface"),
        domain=source.get_str("domain"),
        admin_user=_default(source.get_str("adminUser"), "myriad"),
    )


def _read_ca(path: str | None) -> str | None:
    """The PXE server's CA certificate (PEM), checked to be one, or None when not set."""
    if path is None:
        return None
    try:
        text = Path(path).expanduser().read_text(encoding="ascii")
    except (OSError, UnicodeDecodeError) as exc:
        raise StackError(f"{NAMESPACE}:pxeTlsCaFile {path}: cannot read it: {exc}") from None
    if "-----BEGIN CERTIFICATE-----" not in text:
        raise StackError(
            f"{NAMESPACE}:pxeTlsCaFile {path} holds no PEM certificate "
            "(-----BEGIN CERTIFICATE-----): give the CA that signed the PXE server's TLS "
            "certificate"
        )
    return text


def _address(
    source: ConfigSource,
    key: str,
    network: ipaddress.IPv4Network | ipaddress.IPv6Network,
    *,
    required: bool,
) -> str | None:
    value = source.get_str(key)
    if value is None:
        if required:
            raise StackError(
                f"{NAMESPACE}:{key} is not set: the PXE server's address on the management "
                f"network {network}"
            )
        return None
    address = _ipv4(value, f"{NAMESPACE}:{key}")
    if ipaddress.ip_address(address) not in network:
        raise StackError(f"{NAMESPACE}:{key} {address} is outside the management network {network}")
    return address


def _ipv4(value: Any, where: str) -> str:
    try:
        address = ipaddress.ip_address(value)
    except ValueError:
        raise StackError(f"{where}: {value!r} is not an IPv4 address") from None
    if address.version != 4:
        raise StackError(f"{where}: {value!r} is not an IPv4 address")
    return str(address)


def _positive(source: ConfigSource, key: str, default: float) -> float:
    value = _default(source.get_float(key), default)
    if value <= 0:
        raise StackError(f"{NAMESPACE}:{key} must be a positive number of seconds")
    return value


def _default(value: T | None, default: T) -> T:
    return default if value is None else value
