"""Debian's Chromium driven by Selenium, for the console's browser tests.

Chromium and its driver come from Debian's `chromium` and `chromium-driver`, installed with
apt-get when missing and root, as the servers are; otherwise the tests fail saying how to get
them. The driver is named to Selenium's `Service`, so Selenium Manager is never run and nothing
is downloaded. Every page is drawn at one viewport size, so screenshots are alike run to run.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from selenium import webdriver
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.chrome.webdriver import WebDriver
from selenium.webdriver.common.by import By
from selenium.webdriver.remote.webelement import WebElement
from selenium.webdriver.support.expected_conditions import staleness_of
from selenium.webdriver.support.wait import WebDriverWait

from tools.infra.procs import is_root, tool

WHY = "the console is tested in Chromium"
VIEWPORT = {"width": 1280, "height": 800}
ROOT = Path(__file__).resolve().parents[2]
# Where screenshots go: .run/screenshots (ignored by git), or SETTLE_SCREENSHOTS (relative to
# the checkout), e.g. docs/console to refresh the manual's.
SCREENSHOTS = ROOT / os.environ.get("SETTLE_SCREENSHOTS", ".run/screenshots")
WAIT_SECONDS = 15


@contextmanager
def chromium() -> Iterator[WebDriver]:
    """A headless Chromium at VIEWPORT, quit on the way out."""
    options = webdriver.ChromeOptions()
    options.binary_location = tool("chromium", "chromium", WHY)
    options.add_argument("--headless=new")
    if is_root():
        options.add_argument("--no-sandbox")  # Chromium's sandbox will not start as root
    options.add_argument("--disable-dev-shm-usage")  # a container's /dev/shm is often 64 MB
    options.add_argument(f"--window-size={VIEWPORT['width']},{VIEWPORT['height']}")
    service = Service(tool("chromedriver", "chromium-driver", WHY))
    driver = webdriver.Chrome(options=options, service=service)
    try:
        # The window size includes the browser's frame; the page itself gets exactly VIEWPORT.
        driver.execute_cdp_cmd(
            "Emulation.setDeviceMetricsOverride",
            {**VIEWPORT, "deviceScaleFactor": 1, "mobile": False},
        )
        yield driver
    finally:
        driver.quit()


def page_name(driver: WebDriver) -> str:
    """Which console page the browser shows (`main#page[data-page]`), once it has loaded."""
    main = WebDriverWait(driver, WAIT_SECONDS).until(lambda d: d.find_element(By.ID, "page"))
    return str(main.get_attribute("data-page"))


def screenshot(driver: WebDriver, page: str) -> Path:
    """Save what the browser shows as SCREENSHOTS/<page>.png; its path."""
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    path = SCREENSHOTS / f"{page}.png"
    assert driver.save_screenshot(str(path)), f"no screenshot of {page}"
    return path


def follow(driver: WebDriver, element: WebElement) -> str:
    """Click `element` (a link or a form's button) and wait for the page it leads to; its name."""
    before = driver.find_element(By.ID, "page")
    element.click()
    WebDriverWait(driver, WAIT_SECONDS).until(staleness_of(before))
    return page_name(driver)


def submit(driver: WebDriver, button_id: str) -> str:
    """Click the button with id `button_id` and wait for the page its form leads to; its name."""
    return follow(driver, driver.find_element(By.ID, button_id))


def text_of(driver: WebDriver, css: str) -> str:
    """The visible text of the one element `css` selects, stripped."""
    return str(driver.find_element(By.CSS_SELECTOR, css).text).strip()
