"""deploy/Dockerfile builds on a base image pinned by digest, set by one ARG at its top and
nowhere else, and installs nothing that pip has not checked against a hash in the lock."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
DOCKERFILE = ROOT / "deploy" / "Dockerfile"
PINNED = re.compile(r"[a-z0-9./-]+:[\w.-]+@sha256:[0-9a-f]{64}")
VARIABLE = re.compile(r"\$\{(\w+)\}|\$(\w+)")


def _instructions(dockerfile: Path) -> list[str]:
    """The Dockerfile's instructions, continuation lines joined, comments left out."""
    text = "\n".join(
        line for line in dockerfile.read_text().splitlines() if not line.lstrip().startswith("#")
    )
    return [line.strip() for line in text.replace("\\\n", " ").splitlines() if line.strip()]


def base_images(dockerfile: Path = DOCKERFILE) -> list[str]:
    """The image of every FROM, with the ARGs declared before the first FROM put in."""
    args: dict[str, str] = {}
    images = []
    for instruction in _instructions(dockerfile):
        keyword, _, rest = instruction.partition(" ")
        if keyword == "ARG" and not images:
            name, _, default = rest.partition("=")
            args[name] = default
        elif keyword == "FROM":
            image = rest.split()[0]
            images.append(VARIABLE.sub(lambda m: args[m[1] or m[2]], image))
    return images


@pytest.mark.parametrize(
    "dockerfile", sorted((ROOT / "deploy").rglob("Dockerfile")), ids=lambda p: p.parent.name
)
def test_every_base_image_is_pinned_by_digest(dockerfile: Path) -> None:
    images = base_images(dockerfile)
    assert images
    for image in images:
        assert PINNED.fullmatch(image), f"{image}: pin it as name:tag@sha256:<digest>"


def test_the_digest_is_set_once_in_an_arg_at_the_top() -> None:
    digests = {image.partition("@")[2] for image in base_images()}
    (digest,) = digests
    lines = DOCKERFILE.read_text().splitlines()
    (where,) = [n for n, line in enumerate(lines) if digest in line]
    assert lines[where].startswith("ARG ")
    first_from = next(n for n, line in enumerate(lines) if line.startswith("FROM "))
    assert where < first_from
    assert "sha256:" not in lines[first_from], "FROM names the ARG, not a second copy"
    # Nothing else the deployment is built from names it or sets the ARG another way.
    others = [p for p in (ROOT / "deploy").rglob("*") if p.is_file() and p != DOCKERFILE]
    others += [ROOT / "Makefile", ROOT / "README.md", ROOT / "pyproject.toml"]
    (arg,) = {line.split()[1].partition("=")[0] for line in lines[:first_from] if "ARG " in line}
    for path in others:
        text = path.read_text(errors="replace")
        assert digest not in text and arg not in text, path


def test_the_image_installs_only_hashed_packages() -> None:
    installs = [i for i in _instructions(DOCKERFILE) if i.startswith("RUN ") and "pip install" in i]
    assert installs
    for run in installs:
        for command in run.split("&&"):
            if "pip install" not in command:
                continue
            args = command.split()
            hashed = "--require-hashes" in args and "-r" in args
            # settle itself, from the source copied in: no dependency, no build isolation.
            own = "--no-deps" in args and "--no-build-isolation" in args
            assert hashed or own, command
            assert "-c" not in args and "--upgrade" not in args, command
