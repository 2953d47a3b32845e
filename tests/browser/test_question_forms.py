"""The question forms at the keyboard: several questions one step at a time with a review,
multi-line typed answers checked in the page, "Other…" text kept when an option is picked,
number keys shown on the options, and where the focus goes after an answer."""

import pytest
from playwright.sync_api import expect

from tests.browser.pages import axe_violations, log_in, new_conversation, send

SETUP = "Run the setup survey"


def ask(page, text, name):
    send(page, text)
    group = page.get_by_role("group", name=name, exact=True)
    expect(group).to_be_visible()
    return group


def last_reply(page):
    return page.locator(".message-assistant").last


def answers_sent(page) -> list[str]:
    """The answers this tab posts (never the drafts), as they go out."""
    sent: list[str] = []
    page.on("request", lambda r: r.url.endswith("/answer/") and sent.append(r.post_data or ""))
    return sent


def test_several_questions_step_by_step_with_ticks_and_a_review(page):
    sent = answers_sent(page)
    log_in(page)
    new_conversation(page)
    group = ask(page, SETUP, "Questions")
    steps = group.get_by_role("tablist", name="Steps")
    expect(steps.get_by_role("tab")).to_have_count(3)
    database = steps.get_by_role("tab", name="Database")
    features = steps.get_by_role("tab", name="Features")
    expect(database).to_have_attribute("aria-selected", "true")
    # One question at a time: the second waits for its step.
    expect(group.get_by_role("radio", name="PostgreSQL")).to_be_focused()
    expect(group.get_by_role("checkbox", name="Search")).to_be_hidden()
    expect(group.get_by_role("button", name="Submit")).to_be_hidden()

    # A single choice made moves on, and its tab is ticked.
    group.get_by_role("radio", name="SQLite").check()
    expect(features).to_have_attribute("aria-selected", "true")
    expect(group.get_by_role("checkbox", name="Search")).to_be_focused()
    expect(database).to_have_accessible_name("Database (answered)")
    expect(database.locator(".step-tick")).to_have_text("✓")
    expect(database.locator(".step-tick")).to_be_visible()
    expect(features.locator(".step-tick")).to_be_hidden()
    expect(features).to_have_accessible_name("Features")

    # The review lists every answer and names the one missing, before anything is sent.
    steps.get_by_role("tab", name="Review").click()
    review = group.locator(".question-review")
    expect(review.locator("dt")).to_have_text(["Database", "Features"])
    expect(review.locator("dd")).to_have_text(["SQLite", "Not answered"])
    expect(review).to_contain_text("Missing an answer to: Features")
    group.get_by_role("button", name="Submit").click()
    expect(group.get_by_role("alert")).to_have_text("Missing an answer to: Features")
    # Caught in the page: the step missing an answer is shown, nothing went to the server.
    expect(features).to_have_attribute("aria-selected", "true")
    expect(group.get_by_role("checkbox", name="Search")).to_be_focused()
    assert sent == []

    group.get_by_role("checkbox", name="Search").check()
    group.get_by_role("checkbox", name="Export").check()
    expect(features).to_have_accessible_name("Features (answered)")
    group.get_by_role("button", name="Next").click()
    expect(review.locator("dd")).to_have_text(["SQLite", "Search, Export"])
    expect(group.get_by_role("button", name="Submit")).to_be_focused()
    page.keyboard.press("Enter")
    expect(last_reply(page)).to_contain_text("Setting up with SQLite; Search, Export.")
    assert len(sent) == 1


def test_the_steps_follow_the_arrow_keys(page):
    log_in(page)
    new_conversation(page)
    group = ask(page, SETUP, "Questions")
    steps = group.get_by_role("tablist", name="Steps")
    expect(group.get_by_role("radio", name="PostgreSQL")).to_be_focused()
    page.keyboard.press("ArrowRight")  # the next question
    expect(steps.get_by_role("tab", name="Features")).to_have_attribute("aria-selected", "true")
    expect(group.get_by_role("checkbox", name="Search")).to_be_focused()
    page.keyboard.press("ArrowLeft")
    expect(group.get_by_role("radio", name="PostgreSQL")).to_be_focused()
    page.keyboard.press("Shift+Tab")  # back to the tabs, where arrows move between steps
    expect(steps.get_by_role("tab", name="Database")).to_be_focused()
    page.keyboard.press("End")
    expect(steps.get_by_role("tab", name="Review")).to_be_focused()
    expect(group.locator(".question-review")).to_be_visible()
    page.keyboard.press("Home")
    expect(steps.get_by_role("tab", name="Database")).to_have_attribute("aria-selected", "true")


def test_the_focused_option_is_never_under_the_sticky_header(open_page, parley_server):
    page = open_page(parley_server, viewport={"width": 1280, "height": 420})
    log_in(page)
    new_conversation(page)
    group = ask(page, SETUP, "Questions")
    first = group.get_by_role("radio", name="PostgreSQL")
    expect(first).to_be_focused()
    page.keyboard.press("ArrowDown")
    expect(group.get_by_role("radio", name="SQLite")).to_be_focused()
    header_bottom = page.locator(".topbar").bounding_box()["height"]
    option = group.locator(".option").filter(has=page.get_by_role("radio", name="PostgreSQL"))
    # The page scrolled so that the first option sits under the header, still on screen.
    page.evaluate(f"window.scrollBy(0, {option.bounding_box()['y'] - header_bottom + 12})")
    assert option.bounding_box()["y"] < header_bottom
    page.keyboard.press("ArrowUp")
    expect(first).to_be_focused()
    assert option.bounding_box()["y"] >= header_bottom


def test_typed_answers_are_multi_line_and_an_empty_submit_is_caught_in_the_page(page):
    sent = answers_sent(page)
    log_in(page)
    new_conversation(page)
    group = ask(page, "Name the project", "Name")
    box = group.get_by_role("textbox", name="Your answer")
    expect(box).to_be_focused()
    assert box.evaluate("e => e.tagName") == "TEXTAREA"
    expect(box).to_have_accessible_description("Enter sends; Shift+Enter starts a new line.")
    group.get_by_role("button", name="Submit").click()
    alert = group.get_by_role("alert")
    expect(alert).to_have_text("Missing an answer to: What should we call the new project?")
    expect(box).to_be_focused()
    page.keyboard.press("Enter")  # still empty: caught again
    expect(alert).to_have_text("Missing an answer to: What should we call the new project?")
    assert sent == []
    page.keyboard.type("Apollo")
    page.keyboard.press("Shift+Enter")
    page.keyboard.type("Eleven")
    expect(box).to_have_value("Apollo\nEleven")
    page.keyboard.press("Enter")
    expect(group.locator(".answer-typed")).to_contain_text("Apollo\nEleven", use_inner_text=True)
    assert len(sent) == 1


def test_an_empty_answer_among_several_questions_is_named_in_the_page(page):
    sent = answers_sent(page)
    log_in(page)
    new_conversation(page)
    group = ask(page, SETUP, "Questions")
    group.get_by_role("tab", name="Review").click()
    expect(group.locator(".question-review")).to_contain_text(
        "Missing an answer to: Database and Features"
    )
    group.get_by_role("button", name="Submit").click()
    expect(group.get_by_role("alert")).to_have_text("Missing an answer to: Database and Features")
    expect(group.get_by_role("tab", name="Database")).to_have_attribute("aria-selected", "true")
    # "Other…" opened and left empty is still no answer; its box takes lines.
    page.keyboard.press("3")
    box = group.get_by_role("textbox", name="Your answer")
    expect(box).to_be_focused()
    page.keyboard.type("MariaDB")
    page.keyboard.press("Shift+Enter")
    page.keyboard.type("with Galera")
    page.keyboard.press("Enter")  # on to the next step
    expect(group.get_by_role("tab", name="Features")).to_have_attribute("aria-selected", "true")
    page.keyboard.press("Control+Enter")
    expect(group.get_by_role("alert")).to_have_text("Missing an answer to: Features")
    assert sent == []
    page.keyboard.press("1")
    page.keyboard.press("Control+Enter")
    expect(last_reply(page)).to_contain_text("Setting up with MariaDB")
    expect(group.locator(".answer-typed").first).to_contain_text(
        "MariaDB\nwith Galera", use_inner_text=True
    )


def draft_saved(page, *texts):
    return page.expect_response(
        lambda r: (
            "/draft/" in r.url
            and all(text in (r.request.post_data or "") for text in texts)
            and r.status == 204
        )
    )


def test_picking_an_option_while_other_holds_text_picks_it(page):
    log_in(page)
    new_conversation(page)
    group = ask(page, "Order a pizza", "Pizza")
    group.get_by_role("button", name="Other…").click()
    group.get_by_role("textbox", name="Your answer").fill("Calzone")
    group.get_by_role("button", name="Funghi").click()
    expect(last_reply(page)).to_contain_text("Great, ordering: Funghi.")
    expect(group.locator(".question-answer")).to_have_text("Answer: Funghi")


def test_picking_an_option_keeps_the_other_text_as_a_draft(page, open_page, parley_server):
    log_in(page)
    new_conversation(page)
    group = ask(page, SETUP, "Questions")
    group.get_by_role("radio", name="Other…").check()
    with draft_saved(page, "MariaDB"):
        group.get_by_role("textbox", name="Your answer").fill("MariaDB")
    with draft_saved(page, "SQLite", "MariaDB"):
        group.get_by_role("radio", name="SQLite").check()
    expect(group.get_by_role("tab", name="Features")).to_have_attribute("aria-selected", "true")

    # Another browser: SQLite is the choice, and the text waits behind "Other…".
    elsewhere = open_page(parley_server)
    log_in(elsewhere)
    elsewhere.goto(page.url)
    restored = elsewhere.get_by_role("group", name="Questions", exact=True)
    expect(restored.get_by_role("tab", name="Database")).to_have_accessible_name(
        "Database (answered)"
    )
    restored.get_by_role("tab", name="Database").click()
    expect(restored.get_by_role("radio", name="SQLite")).to_be_checked()
    expect(restored.get_by_role("textbox", name="Your answer")).to_be_hidden()
    restored.get_by_role("radio", name="Other…").check()
    expect(restored.get_by_role("textbox", name="Your answer")).to_have_value("MariaDB")


def test_options_show_their_number_keys_and_a_confirmation_shows_none(page):
    log_in(page)
    new_conversation(page)
    group = ask(page, "Order a pizza", "Pizza")
    for key, name in enumerate(["Margherita", "Pepperoni", "Funghi", "Other…"], start=1):
        option = group.get_by_role("button", name=name)
        expect(option).to_have_attribute("aria-keyshortcuts", str(key))
        expect(option.locator("kbd")).to_have_text(str(key))
        expect(option.locator("kbd")).to_be_visible()
    group.get_by_role("button", name="Pepperoni").click()
    expect(last_reply(page)).to_contain_text("ordering: Pepperoni")

    group = ask(page, "Run the setup survey", "Questions")
    database = group.get_by_role("group", name="Which database should the service use?")
    for key, name in enumerate(["PostgreSQL", "SQLite", "Other…"], start=1):
        expect(database.get_by_role("radio", name=name)).to_have_attribute(
            "aria-keyshortcuts", str(key)
        )
    expect(database.locator("kbd")).to_have_text(["1", "2", "3"])
    group.get_by_role("button", name="Reject").click()

    group = ask(page, "Delete the old tests", "Delete 23 unused test files")
    expect(group.get_by_role("button", name="No")).to_be_focused()
    expect(group.locator("[aria-keyshortcuts]")).to_have_count(0)
    expect(group.locator("kbd")).to_have_count(0)


def test_after_an_answer_the_focus_returns_to_the_composer(page):
    log_in(page)
    new_conversation(page)
    group = ask(page, "Order a pizza", "Pizza")
    group.get_by_role("button", name="Funghi").click()
    expect(last_reply(page)).to_contain_text("ordering: Funghi")
    expect(page.get_by_role("textbox", name="Message")).to_be_focused()


def test_in_the_inbox_the_focus_goes_to_the_next_question(open_page, start_server):
    page = open_page(start_server())  # a server of its own: only these questions wait
    log_in(page)
    for text, name in [("Order a pizza", "Pizza"), ("Pick some toppings", "Toppings")]:
        new_conversation(page)
        ask(page, text, name)
        page.get_by_role("link", name="All conversations").click()
    page.get_by_role("link", name="Questions").first.click()
    inbox = page.get_by_role("list", name="Pending questions")
    expect(inbox.get_by_role("listitem")).to_have_count(2)
    inbox.get_by_role("group", name="Toppings").get_by_role("checkbox", name="Olives").check()
    page.keyboard.press("Enter")  # the toppings' form is sent, and leaves the list
    expect(inbox.get_by_role("listitem")).to_have_count(1)
    pizza = inbox.get_by_role("group", name="Pizza")
    expect(pizza.get_by_role("button", name="Margherita")).to_be_focused()
    page.keyboard.press("2")
    expect(inbox.get_by_role("listitem")).to_have_count(0)


def test_every_question_form_with_the_keyboard_only(page):
    """From the composer through each form and back, without the mouse."""
    log_in(page)
    new_conversation(page)
    composer = page.get_by_role("textbox", name="Message")

    def say(text):
        expect(composer).to_be_focused()
        expect(page.get_by_role("button", name="Send")).to_be_enabled()  # the reply is done
        page.keyboard.type(text)
        page.keyboard.press("Enter")

    say("Order a pizza")  # one choice: a number key answers
    pizza = page.get_by_role("group", name="Pizza")
    expect(pizza.get_by_role("button", name="Margherita")).to_be_focused()
    page.keyboard.press("2")
    expect(last_reply(page)).to_contain_text("ordering: Pepperoni")

    say("Pick some toppings")  # several choices: keys tick, Space ticks, Enter sends
    toppings = page.get_by_role("group", name="Toppings")
    expect(toppings.get_by_role("checkbox", name="Olives")).to_be_focused()
    page.keyboard.press("1")
    page.keyboard.press("ArrowDown")
    page.keyboard.press("ArrowDown")
    page.keyboard.press("Space")
    page.keyboard.press("Enter")
    expect(toppings.locator(".answer-choice")).to_have_text(["Olives", "Peppers"])

    say("Name the project")  # typed: lines with Shift+Enter, Enter sends
    name = page.get_by_role("group", name="Name")
    expect(name.get_by_role("textbox", name="Your answer")).to_be_focused()
    page.keyboard.type("Apollo")
    page.keyboard.press("Shift+Enter")
    page.keyboard.type("Eleven")
    page.keyboard.press("Enter")
    expect(last_reply(page)).to_contain_text("The project is now called Apollo")

    say("Run the setup survey")  # several questions: a step each, then the review
    setup = page.get_by_role("group", name="Questions", exact=True)
    expect(setup.get_by_role("radio", name="PostgreSQL")).to_be_focused()
    page.keyboard.press("2")
    expect(setup.get_by_role("tab", name="Features")).to_have_attribute("aria-selected", "true")
    page.keyboard.press("1")
    page.keyboard.press("Enter")
    expect(setup.get_by_role("button", name="Submit")).to_be_focused()
    expect(setup.locator(".question-review dd")).to_have_text(["SQLite", "Search"])
    page.keyboard.press("Enter")
    expect(last_reply(page)).to_contain_text("Setting up with SQLite; Search.")

    say("Delete the old tests")  # a confirmation: Enter on the focused button, never a key
    confirm = page.get_by_role("group", name="Delete 23 unused test files")
    expect(confirm.get_by_role("button", name="No")).to_be_focused()
    page.keyboard.press("1")
    page.keyboard.press("Shift+Tab")
    expect(confirm.get_by_role("button", name="Yes")).to_be_focused()
    page.keyboard.press("Enter")
    expect(last_reply(page)).to_contain_text("You answered yes.")
    expect(composer).to_be_focused()


THEMES = ["light", "dark"]
WIDTHS = {
    "": {"viewport": {"width": 1280, "height": 900}},
    "-phone": {"viewport": {"width": 390, "height": 844}, "is_mobile": True, "has_touch": True},
}


@pytest.mark.parametrize("theme", THEMES)
@pytest.mark.parametrize("suffix", list(WIDTHS))
def test_the_steps_and_the_review_pass_axe_and_are_photographed(
    open_page, parley_server, screenshots, suffix, theme
):
    page = open_page(parley_server, bypass_csp=True, color_scheme=theme, **WIDTHS[suffix])
    log_in(page)
    new_conversation(page)
    group = ask(page, SETUP, "Questions")
    shot = "{}" + ("-dark" if theme == "dark" else "") + suffix + ".png"
    assert axe_violations(page) == []
    assert not page.evaluate("document.documentElement.scrollWidth > window.innerWidth")
    group.screenshot(path=str(screenshots / shot.format("several-questions-steps")))
    group.get_by_role("radio", name="SQLite").check()
    group.get_by_role("checkbox", name="Other…").check()
    group.get_by_role("textbox", name="Your answer").fill("Audit log")
    group.get_by_role("tab", name="Review").click()
    expect(group.locator(".question-review dd")).to_have_text(["SQLite", "Audit log"])
    group.get_by_role("tab", name="Database").click()
    group.get_by_role("radio", name="Other…").check()  # no answer yet: flagged in the review
    group.get_by_role("tab", name="Review").click()
    expect(group.locator(".question-review")).to_contain_text("Missing an answer to: Database")
    assert axe_violations(page) == []
    assert not page.evaluate("document.documentElement.scrollWidth > window.innerWidth")
    group.screenshot(path=str(screenshots / shot.format("several-questions-review")))
