"""docs/configuration.md is generated (tools/docs/config_page.py) and current, and names every
`SETTLE_*` and `STRIPE_*` environment variable the code mentions."""

from __future__ import annotations

import io
import re
import tokenize
from pathlib import Path

from tools.docs import config_page

ROOT = Path(__file__).resolve().parents[2]
CODE = ("services", "tools", "railsim", "banksim")
# A variable's name: SETTLE_ or STRIPE_ and capitals, not a prefix such as `SETTLE_KAFKA_*`.
VARIABLE = re.compile(r"\b(?:SETTLE|STRIPE)_[A-Z0-9_]*[A-Z0-9](?![A-Z0-9_*])")


def named_in_code() -> dict[str, Path]:
    """Every variable named in a string or comment of the code (Python names such as the
    constant STRIPE_API are not variables), with one file that names it."""
    found: dict[str, Path] = {}
    for package in CODE:
        for path in sorted((ROOT / package).rglob("*.py")):
            tokens = tokenize.generate_tokens(io.StringIO(path.read_text()).readline)
            for token in tokens:
                if token.type in (tokenize.STRING, tokenize.COMMENT):
                    for name in VARIABLE.findall(token.string):
                        found.setdefault(name, path)
    return found


def test_the_page_is_current() -> None:
    config_page.check_meanings()
    assert config_page.PAGE.read_text() == config_page.render(), (
        "docs/configuration.md is not current: .venv/bin/python -m tools.docs.config_page"
    )


def test_every_variable_the_code_names_is_on_the_page() -> None:
    page = config_page.PAGE.read_text()
    listed = set(re.findall(r"^\| `([A-Z0-9_]+)`", page, flags=re.M))
    missing = {name: str(path.relative_to(ROOT)) for name, path in named_in_code().items()}
    missing = {name: path for name, path in missing.items() if name not in listed}
    assert not missing, f"not on docs/configuration.md (add to tools/docs): {missing}"


def test_the_scan_finds_variables_and_skips_names() -> None:
    found = named_in_code()
    assert {"SETTLE_DATABASE_URL", "SETTLE_RUN_DIR", "SETTLE_RAILSIM_DATA_DIR"} <= set(found)
    assert "STRIPE_API" not in found and "SETTLE_KAFKA" not in found
