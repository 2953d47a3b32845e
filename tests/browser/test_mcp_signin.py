"""A server that needs each person's own account, as the person meets it in Chromium: Settings,
Tools says "Connect to use"; Connect (by keyboard) leads to the server's own sign-in and back;
the page then says since when they are connected, and the agent's call of the server's tool
runs as them. Before they connect, the agent's call is refused with words they can act on.
Photographed at desktop and phone width, light and dark, and checked with axe."""

from pathlib import Path

import pytest
from playwright.sync_api import expect

from tests.browser.pages import axe_violations, choose_theme, log_in, new_conversation, send
from tests.live_server import LiveServer
from tests.mcp.tracker import Tracker

SCRIPT = Path(__file__).with_name("signin_script.toml")


@pytest.fixture
def tracker_server(tmp_path):
    tracker = Tracker(tmp_path / "tracker.log")
    server = LiveServer(
        tmp_path, MCP_CONFIG=str(tracker.config(tmp_path)), SCRIPTED_AGENT_SCRIPT=str(SCRIPT)
    )
    server.set_up_database()
    server.manage(
        "shell",
        "-c",
        "from django.contrib.auth.models import User; "
        "User.objects.create_user('carol', password='pw-carol')",
    )
    server.start()
    yield server
    server.stop()
    tracker.stop()


def test_a_person_connects_their_own_account_and_the_agent_acts_as_them(
    open_page, tracker_server, screenshots
):
    # axe is injected for the scans only: this tab's CSP is bypassed.
    page = open_page(tracker_server, bypass_csp=True)
    log_in(page)
    page.goto("/settings/tools/")
    server = page.get_by_role("region", name="tracker")
    expect(server).to_contain_text(
        "Connect to use: this server works with each person’s own account."
    )
    expect(server.get_by_role("table")).to_have_count(0)  # nobody connected: no listing yet
    assert axe_violations(page) == []
    for width in (1280, 390):
        page.set_viewport_size({"width": width, "height": 800})
        for theme in ("Light", "Dark"):
            choose_theme(page, theme)
            page.screenshot(path=str(screenshots / f"tools-connect-{width}-{theme.lower()}.png"))

    # Connect, by keyboard, to the tracker's sign-in page, and back.
    page.get_by_role("button", name="Connect tracker").focus()
    page.keyboard.press("Enter")
    page.get_by_label("Account").fill("demo-on-tracker")
    page.get_by_label("Account").press("Enter")
    expect(page.get_by_role("status").first).to_contain_text("Connected to tracker.")
    expect(server).to_contain_text("Connected with your account since")
    expect(server.get_by_role("button", name="Disconnect tracker")).to_be_visible()
    expect(server.get_by_role("cell", name="Runs at once (reads only)")).to_have_count(1)
    expect(server.get_by_role("cell", name="Connect to use")).to_have_count(0)
    assert axe_violations(page) == []
    for theme in ("Light", "Dark"):
        choose_theme(page, theme)
        page.screenshot(path=str(screenshots / f"tools-connected-390-{theme.lower()}.png"))

    page.set_viewport_size({"width": 1280, "height": 800})
    page.goto("/")
    new_conversation(page)
    send(page, "Ask the tracker who I am")
    expect(page.get_by_text("Tracker says: demo-on-tracker")).to_be_visible()

    # Someone who has not connected (carol): the agent's call is refused, in words they can act
    # on.
    other = open_page(tracker_server)
    log_in(other, "carol", "pw-carol")
    new_conversation(other)
    send(other, "Ask the tracker who I am")
    expect(
        other.get_by_text(
            "Not done: Not run: tracker needs the user's own account, and they have not "
            "connected it. Tell them to open Settings, Tools, and choose Connect beside tracker"
        )
    ).to_be_visible()
