"""Headless Chromium for the UI tests (Debian's ``chromium`` + ``chromedriver``, driven by
Selenium), and helpers to wait for what a single-page app renders."""

from __future__ import annotations

import shutil
import subprocess
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

from selenium import webdriver
from selenium.webdriver.chrome.options import Options
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.common.by import By

ROOT = Path(__file__).resolve().parents[1]
#: Where the UI tests save their screenshots (the docs use some of them).
SCREENSHOTS = ROOT / "outputs" / "ui-screenshots"


@contextmanager
def chromium(width: int = 1400, height: int = 1000) -> Iterator[webdriver.Chrome]:
    """A headless Chromium session (fails with how to install it when it is missing)."""
    browser, driver = shutil.which("chromium"), shutil.which("chromedriver")
    if not browser or not driver:
        raise AssertionError(
            "the UI tests need Debian's chromium and chromium-driver: bash scripts/setup_browser.sh"
        )
    options = Options()
    options.binary_location = browser
    for arg in (
        "--headless=new",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-dev-shm-usage",
        f"--window-size={width},{height}",
    ):
        options.add_argument(arg)
    session = webdriver.Chrome(options=options, service=Service(driver))
    try:
        yield session
    finally:
        session.quit()


def page_text(browser: webdriver.Chrome) -> str:
    """The visible text of the page."""
    return browser.find_element(By.TAG_NAME, "body").text


def wait_for(
    browser: webdriver.Chrome, check: Callable[[str], bool], what: str, timeout: float = 60
) -> str:
    """Wait until ``check(page text)`` holds; returns the text (fails naming ``what``)."""
    deadline = time.monotonic() + timeout
    text = ""
    while time.monotonic() < deadline:
        text = page_text(browser)
        if check(text):
            return text
        time.sleep(0.5)
    shot = screenshot(browser, "failed-" + "".join(c if c.isalnum() else "-" for c in what))
    raise AssertionError(f"{what}: not shown within {timeout}s (screenshot {shot})\n{text[:3000]}")


def click_text(browser: webdriver.Chrome, text: str, timeout: float = 30) -> None:
    """Click the first visible element whose own text is ``text``."""
    deadline = time.monotonic() + timeout
    # the deepest element whose whole text is ``text`` (not its wrappers)
    xpath = f"//*[normalize-space(.)='{text}' and not(*[normalize-space(.)='{text}'])]"
    while time.monotonic() < deadline:
        for element in browser.find_elements(By.XPATH, xpath):
            if element.is_displayed():
                element.click()
                return
        time.sleep(0.5)
    shot = screenshot(browser, "failed-click-" + "".join(c if c.isalnum() else "-" for c in text))
    raise AssertionError(
        f"no clickable {text!r} within {timeout}s (screenshot {shot})\n{page_text(browser)[:3000]}"
    )


def screenshot(browser: webdriver.Chrome, name: str) -> Path:
    """Save a PNG of the window under :data:`SCREENSHOTS`; returns its path."""
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    path = SCREENSHOTS / f"{name}.png"
    browser.save_screenshot(str(path))
    return path


@contextmanager
def mlflow_ui(store_dir: Path) -> Iterator[str]:
    """``mlflow ui`` on 127.0.0.1 over ``store_dir/mlflow.db``; yields its base URL.

    Its output goes to ``store_dir/mlflow-ui.log`` (shown if it exits before listening).
    """
    from infra.processes import free_port, port_listening

    port = free_port()
    log_path = store_dir / "mlflow-ui.log"
    with open(log_path, "wb") as log:
        proc = subprocess.Popen(
            [str(ROOT / ".venv" / "bin" / "mlflow"), "ui", "--host", "127.0.0.1"]
            + ["--port", str(port), "--backend-store-uri", f"sqlite:///{store_dir / 'mlflow.db'}"],
            stdout=log,
            stderr=subprocess.STDOUT,
        )
        try:
            deadline = time.monotonic() + 90
            while not port_listening(port) and time.monotonic() < deadline:
                assert proc.poll() is None, log_path.read_text()[-3000:]
                time.sleep(0.5)
            yield f"http://127.0.0.1:{port}"
        finally:
            proc.terminate()
            proc.wait(timeout=30)
