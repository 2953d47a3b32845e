import os
import uuid
from pathlib import Path

import pytest
from playwright.sync_api import expect, sync_playwright

from tests.live_server import LiveServer

CHROMIUM = os.environ.get("CHROMIUM", "/usr/bin/chromium")
# How long an expect() waits for what the page should come to show, as the contexts' actions
# wait (Playwright's default is 5 s): on a busy 2-core machine a tool server's first start or
# a turn behind others can take longer. A check that something happens *within* a time a
# person would notice says so with its own timeout.
expect.set_options(timeout=10_000)
# Chromium as root in a container, with nothing reaching outside this machine.
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]


def pytest_collection_modifyitems(items):
    for item in items:
        if Path(item.fspath).parent == Path(__file__).parent:
            item.add_marker(pytest.mark.browser)
            item.add_marker(pytest.mark.live)


@pytest.fixture(scope="session")
def parley_server(tmp_path_factory):
    server = LiveServer(tmp_path_factory.mktemp("live"))
    server.set_up_database()
    server.start()
    yield server
    server.stop()


# One Chromium per module: Playwright's sync API keeps an event loop running in this thread
# while it is open, and sync code of later, non-browser tests (async_to_sync, asyncio.run)
# refuses to run under a foreign running loop.
@pytest.fixture(scope="module")
def browser():
    if not Path(CHROMIUM).exists():
        pytest.fail(f"Chromium is needed at {CHROMIUM}: apt-get install -y chromium")
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        yield browser
        browser.close()


@pytest.fixture
def context(browser, parley_server):
    context = browser.new_context(base_url=parley_server.url, locale="en-US")
    context.set_default_timeout(10_000)
    yield context
    context.close()


class ConsoleErrors(list):
    """Console errors of a tab; a test that provokes one on purpose says so with `expect`."""

    def __init__(self) -> None:
        super().__init__()
        self.expected: list[str] = []

    def expect(self, text: str) -> None:
        self.expected.append(text)

    def unexpected(self) -> list[str]:
        return [e for e in self if not any(text in e for text in self.expected)]


@pytest.fixture
def console_errors():
    return ConsoleErrors()


@pytest.fixture
def page(context, console_errors):
    """A tab that fails its test on any unexpected console error (CSP violations included)."""
    page = context.new_page()
    page.on("console", lambda m: m.type == "error" and console_errors.append(m.text))
    page.on("pageerror", lambda error: console_errors.append(str(error)))
    yield page
    assert console_errors.unexpected() == []


@pytest.fixture
def person(parley_server):
    """A user of this test's own: the demo user's questions from other tests would count."""
    name = f"p{uuid.uuid4().hex[:8]}"
    parley_server.manage(
        "shell",
        "-c",
        "from django.contrib.auth.models import User; "
        f"User.objects.create_user({name!r}, password='pw-{name}')",
    )
    return name, f"pw-{name}"


@pytest.fixture
def start_server(tmp_path):
    """Start a server of this test's own, configured by environment variables."""
    servers = []

    def start(**env):
        server = LiveServer(tmp_path / f"server{len(servers)}", **env)
        server.log_path.parent.mkdir()
        server.set_up_database()
        server.start()
        servers.append(server)
        return server

    yield start
    for server in servers:
        server.stop()


@pytest.fixture
def screenshots(tmp_path) -> Path:
    """The folder a test saves its screenshots in: its own tmp_path, never the source tree,
    unless PARLEY_SCREENSHOTS names one (`PARLEY_SCREENSHOTS=docs/screenshots` refreshes the
    docs' pictures on purpose)."""
    chosen = os.environ.get("PARLEY_SCREENSHOTS")
    folder = Path(chosen) if chosen else tmp_path / "screenshots"
    folder.mkdir(parents=True, exist_ok=True)
    return folder


@pytest.fixture
def open_page(browser):
    """A new tab on `server` in a fresh browser context, closed at the end of the test."""
    contexts = []

    def open_(server, *, locale="en-US", **options):
        context = browser.new_context(base_url=server.url, locale=locale, **options)
        contexts.append(context)
        return context.new_page()

    yield open_
    for context in contexts:
        context.close()
