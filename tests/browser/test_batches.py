"""A step's several approvals in the browser, with the example notes server and the scripted
agent: one card with "Allow all 3" (which runs exactly those three, once each) and "Deny all";
with "A deny stops the whole step" on (the default) denying one runs none of the others, and
the agent reads which call was denied and why."""

import re

from playwright.sync_api import expect

from tests.browser.pages import axe_violations, choose_theme, log_in, new_conversation, send
from tests.browser.test_rules import rules_server  # noqa: F401 (a fixture)
from tests.notes_server import writes


def the_card(page):
    return page.get_by_role("group", name=re.compile(r"3 calls of this step wait"))


def test_allow_all_runs_exactly_the_three_calls_once(open_page, rules_server, screenshots):  # noqa: F811
    page = open_page(rules_server, bypass_csp=True)
    log_in(page)
    new_conversation(page)
    send(page, "Save three notes")
    card = the_card(page)
    expect(page.get_by_role("group", name="Write note")).to_have_count(3)
    switch = card.get_by_role("switch", name="A deny stops the whole step")
    expect(switch).to_be_checked()
    assert axe_violations(page) == []
    for width in (1280, 390):
        page.set_viewport_size({"width": width, "height": 900})
        for theme in ("Light", "Dark"):
            choose_theme(page, theme)
            card.scroll_into_view_if_needed()
            page.screenshot(path=str(screenshots / f"approval-batch-{width}-{theme.lower()}.png"))
    card.get_by_role("button", name="Allow all 3").click()
    expect(page.get_by_text(re.compile(r"Results: Saved a .*Saved b .*Saved c"))).to_be_visible()
    expect(page.get_by_text("Allowed", exact=True)).to_have_count(3)
    expect(the_card(page)).to_have_count(0)
    assert [line for line in writes(rules_server.notes) if line.startswith("write")] == [
        "write a",
        "write b",
        "write c",
    ]


def test_denying_one_runs_none_and_the_agent_is_told_which(open_page, rules_server):  # noqa: F811
    page = open_page(rules_server)
    log_in(page)
    new_conversation(page)
    send(page, "Save three notes")
    calls = page.get_by_role("group", name="Write note")
    expect(calls).to_have_count(3)
    calls.nth(0).get_by_role("button", name="Allow", exact=True).click()
    expect(calls.nth(0).get_by_text("Allowed", exact=True)).to_be_visible()
    second = calls.nth(1)
    second.get_by_role("textbox", name="Feedback").fill("Not b")
    second.get_by_role("button", name="Deny").click()
    expect(second.get_by_text("Denied", exact=True)).to_be_visible()
    expect(calls.nth(2)).to_contain_text(
        "Not run: “Write note” was denied, which stops the whole step"
    )
    reply = page.get_by_text(re.compile("^Results: "))
    expect(reply).to_contain_text("None of its calls ran. Their feedback: Not b")
    expect(reply).to_contain_text(
        "The user denied this call: the tool did not run. Their feedback: Not b"
    )
    assert not [line for line in writes(rules_server.notes) if line.startswith("write")]


# --- Two-person approval --------------------------------------------------------------------------

SET_UP_TWO_PEOPLE = """
from django.contrib.auth.models import User
from questions.models import ApprovalRule
for name in ("bo", "cy"):
    User.objects.create_user(name, password="pw-" + name)
ApprovalRule.objects.create(
    scope="user", user=User.objects.get(username="demo"), server="notes", tool="write_note",
    effect="ask", quorum=2, approvers=["bo", "cy"],
)
"""
SHARE = """
from chat.sharing import share_conversation
from django.contrib.auth.models import User
for name in ("bo", "cy"):
    share_conversation(user=User.objects.get(username="demo"), conversation_id={id},
                       username=name, role="participant")
"""


def test_a_two_person_approval_needs_two_others_and_refuses_the_requester(
    open_page,
    rules_server,  # noqa: F811
):
    rules_server.manage("shell", "-c", SET_UP_TWO_PEOPLE)
    page = open_page(rules_server)
    log_in(page)
    new_conversation(page)
    send(page, "Save the first note")
    card = page.get_by_role("group", name="Write note")
    expect(card).to_contain_text("0 of 2 allowed")
    conversation_id = int(re.search(r"/c/(\d+)/", page.url).group(1))
    rules_server.manage("shell", "-c", SHARE.format(id=conversation_id))
    # The person the agent works for is refused, and told why, on the card.
    card.get_by_role("button", name="Allow", exact=True).click()
    expect(card.get_by_role("alert")).to_contain_text(
        "not the Allow of the person the agent works for"
    )
    for person, said in (("bo", "1 of 2 allowed: bo"), ("cy", "Allowed by bo, cy")):
        other = open_page(rules_server)
        log_in(other, person, f"pw-{person}")
        other.goto(f"/c/{conversation_id}/")
        theirs = other.get_by_role("group", name="Write note")
        theirs.get_by_role("button", name="Allow", exact=True).click()
        expect(theirs).to_contain_text(said)
    # The model read who allowed it, with the tool's result.
    reply = page.get_by_role("list", name="Transcript").get_by_role("listitem").last
    expect(reply).to_contain_text("Result: Allowed by bo, cy: this call needed several people")
    expect(reply).to_contain_text("Saved first")
    expect(card).to_contain_text("Allowed by bo, cy")
    assert [line for line in writes(rules_server.notes) if line.startswith("write")] == [
        "write first"
    ]
