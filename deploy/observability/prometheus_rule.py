"""The alert rules of alerts.yaml as a Prometheus Operator PrometheusRule, for Kubernetes.

`python deploy/observability/prometheus_rule.py` writes deploy/k8s/base/prometheus-rule.yaml
from alerts.yaml beside this file: the same groups, rules, expressions, labels and annotations
(the runbook links keep `{{ $externalLabels.runbook_base }}`, which the cluster's Prometheus
sets as an external label). tests/unit/test_deploy_k8s.py checks that the committed file is
what this makes and that its groups equal alerts.yaml's, so the two cannot drift: edit
alerts.yaml, then run this.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

HERE = Path(__file__).resolve().parent
ALERTS = HERE / "alerts.yaml"
OUT = HERE.parent / "k8s" / "base" / "prometheus-rule.yaml"
NAME = "settle-alerts"
HEADER = (
    "# Generated from deploy/observability/alerts.yaml by"
    " deploy/observability/prometheus_rule.py:\n"
    "# do not edit; edit alerts.yaml and run `python deploy/observability/prometheus_rule.py`.\n"
    "# The cluster's Prometheus must select it (ruleSelector, ruleNamespaceSelector).\n"
)


class _Dumper(yaml.SafeDumper):
    """Multi-line strings as literal blocks, the rest as PyYAML writes them."""


def _string(dumper: yaml.SafeDumper, value: str) -> yaml.ScalarNode:
    style = "|" if "\n" in value else None
    return dumper.represent_scalar("tag:yaml.org,2002:str", value, style=style)


_Dumper.add_representer(str, _string)


def groups() -> list[dict[str, Any]]:
    """alerts.yaml's rule groups, as Prometheus reads them."""
    rules: dict[str, Any] = yaml.safe_load(ALERTS.read_text())
    found: list[dict[str, Any]] = rules["groups"]
    return found


def prometheus_rule() -> dict[str, Any]:
    """The PrometheusRule holding alerts.yaml's groups unchanged."""
    return {
        "apiVersion": "monitoring.coreos.com/v1",
        "kind": "PrometheusRule",
        "metadata": {"name": NAME},
        "spec": {"groups": groups()},
    }


def render() -> str:
    """The text of prometheus-rule.yaml, as committed."""
    body: str = yaml.dump(
        prometheus_rule(), Dumper=_Dumper, sort_keys=False, width=4096, allow_unicode=True
    )
    return HEADER + body


def main() -> None:
    """Write deploy/k8s/base/prometheus-rule.yaml."""
    OUT.write_text(render())


if __name__ == "__main__":
    main()
