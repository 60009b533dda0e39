"""The browser session: one Chromium and one JupyterLab server for all lessons; a fresh page per lesson.

Run with ``make test-browser`` (installs requirements-browser.lock into .venv first). Skips with one
sentence when no Chromium or no Playwright is found; ``LMCOURSE_BROWSER_TIMEOUT`` (seconds, default
300) bounds one lesson's Run All.
"""
import pytest

import student
from find_chromium import MISSING, find_chromium
from labserver import LabServer

# The machine's network may be closed: without the background-networking flags Chromium keeps
# trying (and failing) to reach its update, sync and field-trial services.
FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync"]


@pytest.fixture(scope="session")
def chromium_path():
    try:
        path = find_chromium()
    except ValueError as e:
        pytest.fail(str(e), pytrace=False)
    if path is None:
        pytest.skip(MISSING)
    return path


@pytest.fixture(scope="session")
def browser(chromium_path):
    sync_api = pytest.importorskip(
        "playwright.sync_api", reason="Playwright is not installed: `make test-browser` installs "
                                      "requirements-browser.lock into .venv.")
    with sync_api.sync_playwright() as p:
        chromium = p.chromium.launch(executable_path=str(chromium_path), args=FLAGS, headless=True)
        yield chromium
        chromium.close()


@pytest.fixture(scope="session")
def lab(tmp_path_factory):
    server = LabServer(tmp_path_factory.mktemp("lab")).start()
    yield server
    server.stop()


@pytest.fixture
def page(browser, lab):
    context = browser.new_context(viewport={"width": 1400, "height": 1000})
    context.set_default_timeout(60_000)
    yield context.new_page()
    context.close()
    lab.shutdown_kernels()


def pytest_terminal_summary(terminalreporter):
    if student.LOG:
        terminalreporter.section("lessons in the browser")
        for line in student.LOG:
            terminalreporter.write_line(line)
