"""Deadlines and webhooks in a real browser: a question's deadline counts down, and one left
unanswered turns into "Expired" live, without a reload; the webhooks settings page refuses a
private address and says why."""

import re

from playwright.sync_api import expect

from tests.browser.pages import log_in, new_conversation, send


def test_an_unanswered_question_shows_expired_live(open_page, start_server):
    server = start_server(QUESTION_EXPIRE_AFTER="3", PARLEY_SWEEP_SECONDS="0.3")
    page = open_page(server)
    log_in(page)
    new_conversation(page)
    send(page, "Order a pizza")
    question = page.get_by_role("group", name="Pizza")
    expect(question.get_by_text("Expires")).to_be_visible()
    expect(question.get_by_text("Expired", exact=True)).to_be_visible(timeout=20_000)
    expect(question.get_by_role("button")).to_have_count(0)
    # The agent went on without an answer, in its own words (not the model's instruction).
    reply = page.locator(".message-assistant").last
    expect(reply).to_contain_text("No answer came, so I went ahead with my best guess.")
    expect(reply).not_to_contain_text("did not answer this question in time")


def test_webhooks_page_refuses_a_private_address_and_says_why(page, console_errors):
    console_errors.expect("status of 422")  # the refusal's status, logged by the browser
    log_in(page)
    page.goto("/settings/")
    page.get_by_role("link", name="Webhooks").click()
    page.get_by_role("textbox", name="URL").fill("http://127.0.0.1:9/hook")
    page.get_by_role("button", name="Add webhook").click()
    expect(page.get_by_role("alert")).to_contain_text("public addresses")
    expect(page.get_by_role("textbox", name="URL")).to_have_value("http://127.0.0.1:9/hook")
    expect(page.get_by_text("No webhooks yet.")).to_be_visible()


def test_a_deadline_counts_down_while_the_page_is_open(open_page, start_server):
    server = start_server(QUESTION_EXPIRE_AFTER="600")
    page = open_page(server)
    page.clock.install()  # the page's clock, moved on below without waiting
    log_in(page)
    new_conversation(page)
    send(page, "Order a pizza")
    deadline = page.get_by_role("group", name="Pizza").locator(".question-deadline")
    expect(deadline).to_contain_text("Expires in 10 minutes")
    page.clock.fast_forward("04:00")
    expect(deadline).to_contain_text(re.compile(r"Expires in [56] minutes"))
    page.clock.fast_forward("05:30")  # its last minute: in seconds
    expect(deadline).to_contain_text(re.compile(r"Expires in [1-3]?[0-9] seconds"))
