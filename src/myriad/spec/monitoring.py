"""The spec's `monitoring:` section: where Prometheus and Alertmanager run, how often they
look, where alerts go, and the limits the alert rules hold the nodes to.

The hardware's own limits (GPUs per node, GPU board power, link rates) come from the
profiles and the catalog; what the catalog does not hold (a GPU temperature limit) and what
is a matter of policy (how far above the plan's power counts as too much) is set here.
"""

from __future__ import annotations

import urllib.parse
from typing import Annotated

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, model_validator


class _Model(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid", strict=True, allow_inf_nan=False)


def _webhook_url(value: str) -> str:
    try:
        parsed = urllib.parse.urlsplit(value)
        parsed.port  # noqa: B018 - reading the port is what validates it
    except ValueError as exc:
        raise ValueError(f"not a URL such as http://alerts.example:5001/hook ({exc})") from exc
    if parsed.scheme not in ("http", "https") or not parsed.hostname:
        raise ValueError(
            "an Alertmanager webhook is an http(s):// URL, such as http://alerts.example:5001/hook"
        )
    return value


WebhookUrl = Annotated[str, AfterValidator(_webhook_url)]


class Monitoring(_Model):
    """Prometheus, Alertmanager and the exporters; off unless enabled."""

    enabled: bool = Field(default=False, description="Install exporters, Prometheus, Alertmanager")
    servers: tuple[str, ...] = Field(
        default=(),
        max_length=3,
        description="Host names that run Prometheus and Alertmanager; default: the first "
        "controller",
    )
    retention_days: int = Field(
        default=15, ge=1, le=3650, description="How long Prometheus keeps samples, days"
    )
    scrape_interval_seconds: int = Field(
        default=30, ge=1, le=3600, description="How often every exporter is scraped"
    )
    evaluation_interval_seconds: int = Field(
        default=30, ge=1, le=3600, description="How often the alert rules are evaluated"
    )
    alert_for_seconds: int = Field(
        default=300,
        ge=0,
        le=86_400,
        description="How long a condition must hold before its alert fires (the rules' `for:`)",
    )
    webhooks: tuple[WebhookUrl, ...] = Field(
        default=(),
        max_length=16,
        description="Alertmanager webhook receivers alerts are sent to; none: kept in "
        "Alertmanager only",
    )
    gpu_temperature_max_c: int = Field(
        default=85,
        ge=40,
        le=120,
        description="GPU temperature above which an alert fires, degrees C (the catalog has "
        "no temperature limits)",
    )
    power_margin: float = Field(
        default=0.10,
        ge=0.0,
        le=1.0,
        description="How far above the plan's power figures (rack, cluster) measured power may "
        "go before an alert fires (0.10: 10 %)",
    )
    grafana: bool = Field(
        default=False,
        description="Install Grafana from Grafana's apt repository on the monitoring servers "
        "and provision Myriad's dashboards",
    )

    @model_validator(mode="after")
    def _intervals(self) -> Monitoring:
        if self.evaluation_interval_seconds < self.scrape_interval_seconds:
            raise ValueError(
                f"evaluation_interval_seconds {self.evaluation_interval_seconds} is shorter than "
                f"scrape_interval_seconds {self.scrape_interval_seconds}: rules would see the same "
                "samples twice; make it at least the scrape interval"
            )
        if len(set(self.servers)) != len(self.servers):
            raise ValueError("servers lists a host twice; each host runs one Prometheus")
        return self
