"""The question flow in a real browser: ask, pause, and each way of resolving it."""

import re

import pytest
from playwright.sync_api import expect

from tests.browser.pages import log_in, new_conversation, poll, send, transcript_items


def ask(page, text="Order a pizza"):
    log_in(page)
    new_conversation(page)
    page.get_by_role("textbox", name="Message").fill(text)
    page.get_by_role("textbox", name="Message").press("Enter")
    question = page.get_by_role("group", name="Pizza")
    expect(question).to_be_visible()
    expect(question.get_by_text("Which pizza should I order for the team?")).to_be_visible()
    expect(page.get_by_text("Sending a message answers the question.")).to_be_visible()
    return question


def test_clicking_an_option_answers_and_the_agent_resumes(page):
    question = ask(page)
    question.get_by_role("button", name="Pepperoni").click()
    expect(page.locator(".message-assistant").last).to_contain_text("Great, ordering: Pepperoni.")
    expect(question.get_by_role("button")).to_have_count(0)
    expect(question).to_contain_text("Answer: Pepperoni")
    # The answer shows once, in the block: the contract's inserted message (in the data and
    # the API) is not shown again as a bubble, nor the tool result as a card.
    expect(page.locator(".message-user:visible")).to_have_count(1)
    expect(page.locator(".message-user")).to_have_count(2)
    expect(page.get_by_text("Tool result")).to_have_count(0)
    expect(transcript_items(page).filter(has_text="Pepperoni")).to_have_count(2)  # block, reply


def test_typing_a_custom_answer(page):
    question = ask(page)
    expect(question.get_by_role("textbox", name="Your answer")).to_be_hidden()
    expect(question.get_by_role("button", name="Submit")).to_be_hidden()
    question.get_by_role("button", name="Other…").click()
    question.get_by_role("textbox", name="Your answer").fill("Quattro formaggi")
    question.get_by_role("button", name="Submit").click()
    expect(page.locator(".message-assistant").last).to_contain_text("ordering: Quattro formaggi")
    expect(question.get_by_role("textbox")).to_have_count(0)
    # Marked as typed, under its question.
    expect(question.locator(".answer-typed")).to_have_text("typed Quattro formaggi")


def test_an_ordinary_message_answers_the_question(page):
    question = ask(page)
    page.get_by_role("textbox", name="Message").fill("Whatever is vegetarian")
    page.get_by_role("textbox", name="Message").press("Enter")
    expect(page.locator(".message-assistant").last).to_contain_text(
        "ordering: Whatever is vegetarian"
    )
    # The user's own message is the answer: it stays, and the block points to it.
    expect(question).to_contain_text("Answered by your message.")
    expect(page.locator(".message-user:visible")).to_have_count(2)


def test_rejecting_inserts_nothing_and_stops(page):
    question = ask(page)
    question.get_by_role("button", name="Reject").click()
    expect(question.get_by_text("Rejected")).to_be_visible()
    expect(question.get_by_role("button")).to_have_count(0)
    expect(page.locator(".message-user")).to_have_count(1)
    expect(page.get_by_text("Sending a message answers the question.")).to_have_count(0)
    # What happened, and what to do next; no "Tool error" card.
    expect(page.get_by_role("status").filter(has_text="so the agent stopped")).to_be_visible()
    expect(page.get_by_text("Tool error")).to_have_count(0)


def test_multi_select_and_an_answer_seen_live_in_another_tab(context, page):
    log_in(page)
    new_conversation(page)
    send(page, "Pick some toppings")
    question = page.get_by_role("group", name="Toppings")
    expect(question).to_be_visible()
    other = context.new_page()
    other.goto(page.url)
    question.get_by_role("checkbox", name="Olives").check()
    question.get_by_role("checkbox", name="Extra cheese").check()
    other_question = other.get_by_role("group", name="Toppings")
    expect(other_question.get_by_role("checkbox")).to_have_count(5)  # four, and "Other…"
    question.get_by_role("button", name="Submit").click()
    # The other tab's form is replaced in place: no stale inputs left to click.
    expect(other_question.get_by_role("checkbox")).to_have_count(0)
    expect(other_question).to_contain_text("Answer: Olives")
    expect(other_question.locator(".answer-choice")).to_have_text(["Olives", "Extra cheese"])
    expect(other.locator(".message-assistant").last).to_contain_text("Adding these toppings")


@pytest.mark.parametrize("choice", ["Yes", "No"])
def test_confirm_action(page, choice):
    log_in(page)
    new_conversation(page)
    page.get_by_role("textbox", name="Message").fill("Please delete the old tests")
    page.get_by_role("textbox", name="Message").press("Enter")
    question = page.get_by_role("group", name="Delete 23 unused test files")
    expect(question.get_by_text("git history keeps them")).to_be_visible()
    question.get_by_role("button", name=choice).click()
    said = "yes" if choice == "Yes" else "no"
    expect(page.locator(".message-assistant").last).to_contain_text(f"You answered {said}.")


def test_a_question_from_an_openai_compatible_endpoint(open_page, start_server):
    from tests.fake_llm import FakeLLM

    llm = FakeLLM()
    llm.queue(
        {
            "tool_calls": [
                {
                    "id": "call_q",
                    "name": "question",
                    "arguments": '{"header": "Deploy", "question": "Deploy to which region?", '
                    '"options": [{"label": "eu-west"}, {"label": "us-east"}]}',
                }
            ]
        },
        {"text": "Deploying to **eu-west**."},
    )
    server = start_server(AGENT_PROVIDER="openai", OPENAI_BASE_URL=f"{llm.url}/v1")
    page = open_page(server, locale="en-US")
    try:
        log_in(page)
        new_conversation(page)
        page.get_by_role("textbox", name="Message").fill("Ship it")
        page.get_by_role("textbox", name="Message").press("Enter")
        page.get_by_role("group", name="Deploy").get_by_role("button", name="eu-west").click()
        expect(page.locator(".message-assistant").last).to_contain_text("Deploying to eu-west.")
        tool_message = llm.requests[1]["body"]["messages"][-1]
        assert tool_message == {"role": "tool", "tool_call_id": "call_q", "content": "eu-west"}
    finally:
        llm.close()


def test_the_inbox_opens_at_its_top_on_the_newest_question_with_what_the_agent_said(
    browser, parley_server, person
):
    context = browser.new_context(
        base_url=parley_server.url, locale="en-US", viewport={"width": 1280, "height": 600}
    )
    try:
        page = context.new_page()
        log_in(page, *person)
        for text, header in [
            ("Order a pizza", "Pizza"),
            ("Pick some toppings", "Toppings"),
            ("Order a pizza for Friday", "Pizza"),
        ]:
            new_conversation(page)
            send(page, text)
            expect(page.get_by_role("group", name=header)).to_be_visible()

        # Counts what the live channel pushes (static/parley.js announces each as parley:pushed).
        page.add_init_script(
            "window.__pushes = 0;"
            "document.addEventListener('parley:pushed', () => { window.__pushes += 1; });"
        )
        page.goto("/questions/")
        items = page.get_by_role("list", name="Pending questions").get_by_role("listitem")
        expect(items).to_have_count(3)
        page.wait_for_load_state("load")
        expect(items.first.get_by_role("group", name="Pizza")).to_be_visible()
        # Newest first: each card names its conversation...
        links = items.get_by_role("link", name=re.compile("^(Order|Pick)"))
        expect(links).to_have_text(
            ["Order a pizza for Friday", "Pick some toppings", "Order a pizza"]
        )
        # ...and what the agent said just before asking (when it said anything).
        expect(items.first).to_contain_text("Let me ask you something first.")
        expect(items.nth(1).locator(".inbox-context")).to_have_count(0)
        # The page stays at its top, where the newest question is, also once the live
        # channel's first push (sent as its socket opens) has been handled.
        assert poll(page, "window.__pushes", bool, timeout=10), "the live channel pushed nothing"
        assert page.evaluate("window.scrollY") == 0
        expect(items.first).to_be_in_viewport()
    finally:
        context.close()
