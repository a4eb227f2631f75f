"""requirements.lock (what `make install` takes) and requirements-runtime.lock (what the image
takes) pin every package exactly, each with the sha256 of its files, and leave out none of
the project's own requirements (pyproject.toml: dependencies, the dev extra, the build)."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name
from packaging.version import Version

ROOT = Path(__file__).resolve().parents[2]
FULL, RUNTIME = ROOT / "requirements.lock", ROOT / "requirements-runtime.lock"
PIN = re.compile(r"([A-Za-z0-9][A-Za-z0-9._-]*)(?:\[[\w,-]+\])?==(\S+)")
HASH = re.compile(r"--hash=sha256:[0-9a-f]{64}")


def _entries(path: Path) -> list[str]:
    """The lock's requirement lines, continuations joined, comments left out."""
    lines = [line.split(" #", 1)[0] for line in path.read_text().splitlines()]
    joined = "\n".join(line for line in lines if not line.lstrip().startswith("#"))
    return [entry.strip() for entry in joined.replace("\\\n", " ").splitlines() if entry.strip()]


def pins(path: Path) -> dict[str, tuple[Version, frozenset[str]]]:
    """Normalised name -> (version, hashes) of every line of the lock."""
    found: dict[str, tuple[Version, frozenset[str]]] = {}
    for entry in _entries(path):
        pin = PIN.match(entry)
        assert pin, f"{path.name}: not pinned with ==: {entry[:80]}"
        hashes = frozenset(HASH.findall(entry))
        assert hashes, f"{path.name}: {pin[1]} has no --hash"
        assert not HASH.sub("", entry[pin.end() :]).strip(), f"{path.name}: {entry[:80]}"
        found[canonicalize_name(pin[1])] = (Version(pin[2]), hashes)
    return found


def _project() -> dict[str, list[str]]:
    pyproject = tomllib.loads((ROOT / "pyproject.toml").read_text())
    return {
        "runtime": pyproject["project"]["dependencies"],
        "dev": pyproject["project"]["optional-dependencies"]["dev"],
        "build": pyproject["build-system"]["requires"],
    }


@pytest.mark.parametrize("path", [FULL, RUNTIME], ids=lambda p: p.name)
def test_every_line_is_pinned_with_its_hashes(path: Path) -> None:
    assert len(pins(path)) > 10


@pytest.mark.parametrize(
    ("path", "groups"),
    [(FULL, ("runtime", "dev", "build")), (RUNTIME, ("runtime", "build"))],
    ids=["requirements.lock", "requirements-runtime.lock"],
)
def test_every_project_requirement_is_locked_at_a_version_it_allows(
    path: Path, groups: tuple[str, ...]
) -> None:
    locked = pins(path)
    for group in groups:
        for line in _project()[group]:
            requirement = Requirement(line)
            name = canonicalize_name(requirement.name)
            assert name in locked, f"{requirement.name} ({group}) is not in {path.name}"
            version, _ = locked[name]
            assert requirement.specifier.contains(version, prereleases=True), (line, version)


def test_the_runtime_lock_is_the_full_lock_less_the_dev_tools() -> None:
    full, runtime = pins(FULL), pins(RUNTIME)
    assert runtime.keys() <= full.keys()
    for name, (version, hashes) in runtime.items():
        assert full[name] == (version, hashes), name
    assert not {"pytest", "hypothesis", "mypy", "ruff", "selenium"} & runtime.keys()
