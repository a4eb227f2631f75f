"""The Kubernetes manifests as a cluster is given them: each overlay of deploy/k8s rendered by
`kubectl kustomize` (kubectl's own kustomize, the one `kubectl apply -k` runs). kubectl is a
requirement of the unit tests: without it they fail, they do not skip."""

from __future__ import annotations

import functools
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
K8S = ROOT / "deploy" / "k8s"
BASE = K8S / "base"
OVERLAYS = ("local", "production")
# Resources of the Prometheus Operator's custom kinds (no schema in kubernetes-validate).
OPERATOR_KINDS = {"PodMonitor", "PrometheusRule"}
_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


def kubectl() -> str:
    found = shutil.which("kubectl")
    if found is None:
        pytest.fail("kubectl is needed to render deploy/k8s/overlays (kubectl kustomize)")
    return found


@functools.cache
def rendered_text(overlay: str) -> str:
    """`kubectl kustomize deploy/k8s/overlays/<overlay>`: what `kubectl apply -k` applies."""
    done = subprocess.run(
        [kubectl(), "kustomize", str(K8S / "overlays" / overlay)],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, f"overlays/{overlay} does not render:\n{done.stderr}"
    return done.stdout


@functools.cache
def rendered(overlay: str) -> tuple[dict[str, Any], ...]:
    """The overlay's resources, parsed (shared between tests: do not change them)."""
    return tuple(d for d in yaml.load_all(rendered_text(overlay), Loader=_LOADER) if d)


def docs(overlay: str, kind: str) -> dict[str, dict[str, Any]]:
    """The overlay's resources of one kind, by name."""
    return {d["metadata"]["name"]: d for d in rendered(overlay) if d["kind"] == kind}


def workloads(overlay: str) -> dict[str, dict[str, Any]]:
    """The overlay's Deployments and Jobs, by name."""
    return {**docs(overlay, "Deployment"), **docs(overlay, "Job")}


def image_name(image: str) -> tuple[str, str, str]:
    """(registry and path, last path segment, tag) of an image reference name[:tag]."""
    path, _, last = image.rpartition("/")
    name, _, tag = last.partition(":")
    return path, name, tag
