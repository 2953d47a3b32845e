"""Linking a Slack account, as the person does it in Chromium against a live Parley whose Slack
app talks to a local fake of Slack's Web API: Settings, Slack takes the member ID; the bot's
message in Slack carries a Confirm button, whose signed click (posted here as Slack posts it)
links the account; Settings then says so, and Unlink is one click. Photographed at desktop and
phone width, light and dark, and checked with axe."""

import threading
from http.server import ThreadingHTTPServer

import httpx
import pytest
from playwright.sync_api import expect

from tests.browser.pages import axe_violations, choose_theme, log_in
from tests.live_server import LiveServer, wait_for
from tests.slackbot.conftest import SECRET, TEAM, FakeSlack, form, sign, slack_handler

MEMBER = "U0DEMO"


@pytest.fixture
def slack_server(tmp_path):
    """A Parley server with its Slack app pointed at a fake Web API (`server.slack`)."""
    fake = FakeSlack()
    api = ThreadingHTTPServer(("127.0.0.1", 0), slack_handler(fake))
    threading.Thread(target=api.serve_forever, daemon=True).start()
    fake.url = f"http://127.0.0.1:{api.server_address[1]}/api/"
    server = LiveServer(
        tmp_path,
        SLACK_BOT_TOKEN="xoxb-test-token",
        SLACK_SIGNING_SECRET=SECRET,
        SLACK_API_URL=fake.url,
    )
    server.set_up_database()
    server.start()
    server.slack = fake
    yield server
    server.stop()
    api.shutdown()
    api.server_close()


def confirm_button(fake: FakeSlack) -> dict:
    """The Confirm button of the bot's message to MEMBER, once the outbox has sent it."""
    wait_for(lambda: fake.called("chat.postMessage"), 20, "the bot's message to the member")
    [sent] = fake.called("chat.postMessage")
    assert sent["channel"] == MEMBER
    [confirm] = [e for b in sent["blocks"] if b["type"] == "actions" for e in b["elements"]]
    return confirm


def test_a_person_links_their_slack_account_and_unlinks_it(open_page, slack_server, screenshots):
    # axe is injected for the scans only: this tab's CSP is bypassed.
    page = open_page(slack_server, bypass_csp=True)
    log_in(page)
    page.goto("/settings/")
    section = page.get_by_role("region", name="Slack")
    section.get_by_role("textbox", name="Your Slack member ID").fill(MEMBER)
    section.get_by_role("button", name="Link Slack account").click()
    expect(page.get_by_text("confirm the link there", exact=False).first).to_be_visible()
    expect(section).to_contain_text(f"Waiting for the Slack member {MEMBER} to confirm")
    assert axe_violations(page) == []

    # Slack posts the member's click on Confirm to the Interactivity URL, signed.
    click = {
        "type": "block_actions",
        "user": {"id": MEMBER, "team_id": TEAM},
        "team": {"id": TEAM},
        "trigger_id": "1.2.3",
        "container": {"type": "message", "channel_id": "D" + MEMBER, "message_ts": "1.2"},
        "actions": [
            {
                "type": "button",
                "action_id": "confirm_link",
                "value": confirm_button(slack_server.slack)["value"],
            }
        ],
    }
    body = form(click)
    headers = {**sign(body), "Content-Type": "application/x-www-form-urlencoded"}
    posted = httpx.post(
        f"{slack_server.url}/integrations/slack/interactions", content=body, headers=headers
    )
    assert posted.status_code == 200, posted.text

    page.reload()
    expect(section).to_contain_text(f"Linked to the Slack member {MEMBER}")
    assert axe_violations(page) == []
    for width in (1280, 390):
        page.set_viewport_size({"width": width, "height": 800})
        for theme in ("Light", "Dark"):
            choose_theme(page, theme)
            section.scroll_into_view_if_needed()
            page.screenshot(path=str(screenshots / f"settings-slack-{width}-{theme.lower()}.png"))

    section.get_by_role("button", name="Unlink Slack account").focus()
    page.keyboard.press("Enter")
    expect(page.get_by_text("Your Slack account is no longer linked.")).to_be_visible()
    expect(section.get_by_role("button", name="Link Slack account")).to_be_visible()
