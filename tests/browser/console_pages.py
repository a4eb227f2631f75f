"""The console's pages as the tests read and work them, through the hooks its markup contract
names (`main#page[data-page]`, `#error[data-code]`, `select-<id>` boxes, `#outcomes`)."""

from __future__ import annotations

import pytest
from selenium.webdriver.chrome.webdriver import WebDriver
from selenium.webdriver.common.by import By

from tests.browser.chromium import page_name, submit
from tests.browser.console_support import OPERATORS, Console

OPERATOR = "alice"


def visit(browser: WebDriver, console: Console, path: str) -> str:
    """Open `path` on the console; the name of the page shown."""
    browser.get(f"{console.url}{path}")
    return page_name(browser)


def sign_in(browser: WebDriver, console: Console, token: str) -> str:
    """Sign in through the form with `token`; the name of the page that follows."""
    visit(browser, console, "/login")
    field = browser.find_element(By.ID, "token")
    field.clear()
    field.send_keys(token)
    return submit(browser, "sign-in")


@pytest.fixture
def signed_in(browser: WebDriver, console: Console) -> WebDriver:
    """The browser signed in as OPERATOR (already, when the tests before it ran)."""
    if visit(browser, console, "/") != "overview":
        assert sign_in(browser, console, OPERATORS[OPERATOR]) == "overview"
    return browser


def tick(browser: WebDriver, *ids: object) -> None:
    """Select the queue rows with these ids."""
    for item in ids:
        browser.find_element(By.ID, f"select-{item}").click()


def outcomes(browser: WebDriver) -> dict[str, tuple[str, str | None]]:
    """Each item's outcome after a bulk action: id -> (done|refused, refusal code)."""
    rows = browser.find_elements(By.CSS_SELECTOR, "#outcomes tr.outcome")
    return {
        str(r.get_attribute("data-id")): (
            str(r.get_attribute("data-outcome")),
            r.get_attribute("data-code") or None,
        )
        for r in rows
    }


def error_code(browser: WebDriver) -> str:
    """The machine-readable code of the error the page shows."""
    return str(browser.find_element(By.ID, "error").get_attribute("data-code"))


def forge_post(browser: WebDriver, origin: str, action: str, fields: dict[str, str]) -> str:
    """Submit a form of `fields` to `action` from `origin`'s /healthz page, as a forger's page
    would (no form token); the name of the console page that answers."""
    browser.get(f"{origin}/healthz")
    browser.execute_script(
        """const form = document.createElement('form');
        form.method = 'post'; form.action = arguments[0];
        for (const [name, value] of Object.entries(arguments[1])) {
          const field = document.createElement('input');
          field.name = name; field.value = value; form.appendChild(field);
        }
        document.body.appendChild(form); form.submit();""",
        action,
        fields,
    )
    return page_name(browser)
