"""Drafts in a real browser: what is chosen or typed in a pending question follows the user to
another browser, other open tabs say it is being answered elsewhere, and a draft never answers."""

from playwright.sync_api import expect

from tests.browser.pages import log_in, new_conversation, send

ELSEWHERE = "Being answered in another tab or device…"


def draft_saved(page, text):
    """Wait until this tab has saved a draft containing `text`."""
    return page.expect_response(
        lambda r: "/draft/" in r.url and text in (r.request.post_data or "") and r.status == 204
    )


def test_a_draft_follows_the_user_to_another_browser_and_never_answers(
    context, page, open_page, parley_server
):
    log_in(page)
    new_conversation(page)
    send(page, "Pick some toppings")
    question = page.get_by_role("group", name="Toppings")
    expect(question).to_be_visible()
    second_tab = context.new_page()
    second_tab.goto(page.url)
    expect(second_tab.get_by_role("group", name="Toppings")).to_be_visible()
    expect(second_tab.get_by_text(ELSEWHERE)).to_have_count(0)

    with draft_saved(page, "Pineapple"):
        question.get_by_role("checkbox", name="Olives").check()
        question.get_by_role("checkbox", name="Other…").check()
        question.get_by_role("textbox", name="Your answer").fill("Pineapple")

    # The open tab hears of it live; the tab that typed does not call itself "elsewhere".
    expect(second_tab.get_by_text(ELSEWHERE)).to_be_visible()
    expect(page.locator(".question-elsewhere[data-client]")).to_have_count(1)
    expect(page.locator(".question-elsewhere")).to_be_hidden()

    # Another browser (a new log-in) opens the conversation: the draft is restored.
    elsewhere = open_page(parley_server)
    log_in(elsewhere)
    elsewhere.goto(page.url)
    restored = elsewhere.get_by_role("group", name="Toppings")
    expect(restored.get_by_role("checkbox", name="Olives")).to_be_checked()
    expect(restored.get_by_role("checkbox", name="Onions")).not_to_be_checked()
    expect(restored.get_by_role("checkbox", name="Other…")).to_be_checked()
    expect(restored.get_by_role("textbox", name="Your answer")).to_have_value("Pineapple")

    # Nothing was answered: the agent still waits, in every tab, after a reload too.
    page.reload()
    expect(page.get_by_text("Parley is waiting for your answer.")).to_be_visible()
    expect(
        page.get_by_role("group", name="Toppings").get_by_role("button", name="Submit")
    ).to_be_visible()
    expect(page.locator(".message-user:visible")).to_have_count(1)

    # Sent from the other browser, it is answered once, with what the draft held.
    restored.get_by_role("button", name="Submit").click()
    expect(elsewhere.locator(".message-assistant").last).to_contain_text("Olives")
    expect(restored).to_contain_text("Pineapple")
    expect(page.get_by_role("group", name="Toppings").get_by_role("checkbox")).to_have_count(0)


def test_typed_other_answer_of_a_single_choice_is_restored(page, open_page, parley_server):
    log_in(page)
    new_conversation(page)
    send(page, "Order a pizza")
    question = page.get_by_role("group", name="Pizza")
    question.get_by_role("button", name="Other…").click()
    with draft_saved(page, "Calzone"):
        question.get_by_role("textbox", name="Your answer").fill("Calzone")

    other = open_page(parley_server)
    log_in(other)
    other.goto(page.url)
    restored = other.get_by_role("group", name="Pizza")
    expect(restored.get_by_role("button", name="Other…")).to_have_attribute("aria-expanded", "true")
    expect(restored.get_by_role("textbox", name="Your answer")).to_have_value("Calzone")
    expect(restored.get_by_role("button", name="Submit")).to_be_visible()


def test_a_draft_too_long_to_save_is_refused_in_the_block(page, console_errors):
    console_errors.expect("status of 413")
    log_in(page)
    new_conversation(page)
    send(page, "Name the project")
    question = page.get_by_role("group", name="Name")
    question.get_by_role("textbox", name="Your answer").fill("x" * 20_001)
    expect(question.get_by_role("alert")).to_have_text(
        "This draft is too long to be saved. Shorten it, or send it as it is."
    )
    # What was typed stays; the question still waits.
    expect(question.get_by_role("textbox", name="Your answer")).to_have_value("x" * 20_001)
    expect(page.get_by_text("Parley is waiting for your answer.")).to_be_visible()
