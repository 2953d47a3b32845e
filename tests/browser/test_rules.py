"""Approval rules through the browser, with the example notes server and the scripted agent:
"Always allow" on a write keeps a narrow rule (this conversation, these arguments), which
Settings, Tools lists (and axe finds nothing serious there); the next identical call runs
without asking and says which rule allowed it, while the same tool with other arguments still
asks."""

import re
from pathlib import Path

import pytest
from playwright.sync_api import expect

from tests.browser.pages import axe_violations, log_in, new_conversation, send
from tests.live_server import LiveServer
from tests.notes_server import notes_config, writes

SCRIPT = Path(__file__).with_name("rules_script.toml")


@pytest.fixture
def rules_server(tmp_path):
    with notes_config(tmp_path, "stdio") as (config, notes):
        server = LiveServer(tmp_path, MCP_CONFIG=str(config), SCRIPTED_AGENT_SCRIPT=str(SCRIPT))
        server.set_up_database()
        server.start()
        server.notes = notes
        yield server
        server.stop()


def approvals(page):
    return page.get_by_role("group", name="Write note")


def test_always_allow_keeps_a_narrow_rule_that_runs_the_same_call_and_asks_for_another(
    open_page, rules_server, screenshots
):
    # axe is injected for the scan of Settings, Tools only: the page's CSP allows no inline script.
    page = open_page(rules_server, bypass_csp=True)
    log_in(page)
    new_conversation(page)
    send(page, "Save the first note")
    first = approvals(page).last
    first.get_by_role("button", name="Always allow").click()
    expect(first.get_by_text("Always allowed", exact=True)).to_be_visible()
    expect(first.get_by_text(re.compile("Parley keeps your rule"))).to_contain_text(
        "in this conversation"
    )
    expect(page.get_by_text("Result: Saved first")).to_be_visible()

    # The same call again: it runs without asking, and says which rule allowed it.
    send(page, "Save the first note again")
    expect(page.get_by_text("Result: Saved first")).to_have_count(2)
    expect(approvals(page)).to_have_count(2)
    expect(approvals(page).last.get_by_text(re.compile("Allowed by your rule"))).to_be_visible()
    expect(page.get_by_role("button", name="Allow", exact=True)).to_have_count(0)
    assert writes(rules_server.notes).count("write first") == 2

    # The same tool with other arguments asks.
    send(page, "Save the second note")
    second = approvals(page).last
    expect(second.get_by_role("button", name="Allow", exact=True)).to_be_visible()
    assert "write second" not in writes(rules_server.notes)
    second.get_by_role("button", name="Deny").click()
    expect(second.get_by_text("Denied", exact=True)).to_be_visible()

    # Settings, Tools lists the rule, for this conversation and these arguments, revocable.
    page.goto("/settings/tools/")
    rules = page.get_by_role("table", name="Your rules")
    row = rules.get_by_role("row", name=re.compile("write_note"))
    expect(row).to_have_count(1)
    expect(row).to_contain_text("name = first")
    expect(row).to_contain_text("In “")
    expect(
        row.get_by_role("button", name=re.compile(r"Revoke rule \d+ on write_note"))
    ).to_be_visible()
    page.get_by_text("Add rule", exact=True).first.click()
    expect(page.get_by_role("textbox", name="Tool")).to_be_visible()
    assert axe_violations(page) == []
    # As a person sees the page: both widths, both themes.
    for width in (1280, 390):
        page.set_viewport_size({"width": width, "height": 900})
        for theme in ("light", "dark"):
            page.emulate_media(color_scheme=theme)
            assert page.evaluate("document.documentElement.scrollWidth <= window.innerWidth")
            page.screenshot(
                path=str(screenshots / f"tool-rules-{width}-{theme}.png"), full_page=True
            )
