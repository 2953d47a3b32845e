"""The question UI: keyboard-only answering, focus, accessibility scan, languages, reloads,
double clicks, and screenshots of every form (the docs' pictures: tests/browser/conftest.py's
`screenshots`)."""

import re

import pytest
from playwright.sync_api import expect

from tests.browser.pages import (
    axe_violations,
    log_in,
    new_conversation,
    send,
    touch_screen,
    user_menu,
)
from tests.live_server import wait_for

FORMS = {
    # what to say: (the question's group name, its screenshot name)
    "pizza": ("Pizza", "single-select"),
    "toppings": ("Toppings", "multi-select"),
    "name": ("Name", "free-form"),
    "setup": ("Questions", "several-questions"),
    "delete": ("Delete 23 unused test files", "confirm-action"),
}


def ask(page, word):
    page.get_by_role("textbox", name="Message").fill(f"Let's try {word}")
    if touch_screen(page):
        page.get_by_role("button", name="Send").click()
    else:
        page.get_by_role("textbox", name="Message").press("Enter")
    group = page.get_by_role("group", name=FORMS[word][0], exact=True)
    expect(group).to_be_visible()
    return group


def last_reply(page):
    return page.locator(".message-assistant").last


def test_single_choice_focus_arrows_and_enter(page):
    log_in(page)
    new_conversation(page)
    group = ask(page, "pizza")
    # Focus on the first option, not a text box (no keyboard popping up on a phone).
    expect(group.get_by_role("button", name="Margherita")).to_be_focused()
    expect(group.get_by_role("textbox", name="Your answer")).to_be_hidden()
    expect(group.get_by_role("button", name="Submit")).to_be_hidden()
    page.keyboard.press("ArrowDown")
    expect(group.get_by_role("button", name="Pepperoni")).to_be_focused()
    page.keyboard.press("Enter")
    expect(last_reply(page)).to_contain_text("ordering: Pepperoni")


def test_number_keys_pick_the_nth_option(page):
    log_in(page)
    new_conversation(page)
    ask(page, "pizza")
    page.keyboard.press("3")
    expect(last_reply(page)).to_contain_text("ordering: Funghi")


def test_other_is_the_last_option_and_reveals_the_box_and_submit(page):
    log_in(page)
    new_conversation(page)
    group = ask(page, "pizza")
    options = group.locator(".option-button .option-label")
    expect(options).to_have_text(["Margherita", "Pepperoni", "Funghi", "Other…"])
    page.keyboard.press("4")  # number keys reach "Other…" too
    box = group.get_by_role("textbox", name="Your answer")
    expect(box).to_be_focused()
    expect(group.get_by_role("button", name="Other…")).to_have_attribute("aria-expanded", "true")
    expect(group.get_by_role("button", name="Submit")).to_be_visible()
    page.keyboard.type("Calzone")
    page.keyboard.press("Enter")
    expect(last_reply(page)).to_contain_text("ordering: Calzone")


def test_closing_other_keeps_its_text_and_reopening_shows_it(page):
    log_in(page)
    new_conversation(page)
    group = ask(page, "pizza")
    group.get_by_role("button", name="Other…").click()
    group.get_by_role("textbox", name="Your answer").fill("Calzone")
    group.get_by_role("button", name="Other…").click()
    expect(group.get_by_role("textbox", name="Your answer")).to_be_hidden()
    group.get_by_role("button", name="Other…").click()
    expect(group.get_by_role("textbox", name="Your answer")).to_have_value("Calzone")
    page.keyboard.press("Enter")
    expect(last_reply(page)).to_contain_text("ordering: Calzone")


def test_several_choices_with_number_keys_space_and_ctrl_enter(page):
    log_in(page)
    new_conversation(page)
    group = ask(page, "toppings")
    expect(group.get_by_role("checkbox", name="Olives")).to_be_focused()
    page.keyboard.press("1")
    page.keyboard.press("3")
    page.keyboard.press("ArrowDown")
    expect(group.get_by_role("checkbox", name="Extra cheese")).to_be_focused()
    page.keyboard.press("Space")
    page.keyboard.press("Control+Enter")
    expect(last_reply(page)).to_contain_text("Adding these toppings")
    expect(group.locator(".answer-choice")).to_have_text(["Olives", "Peppers", "Extra cheese"])


def test_an_empty_submit_shows_why_and_keeps_the_form(page):
    log_in(page)
    new_conversation(page)
    group = ask(page, "toppings")
    group.get_by_role("checkbox", name="Other…").check()
    group.get_by_role("button", name="Submit").click()
    expect(group.get_by_role("alert")).to_have_text(
        "Missing an answer to: Which extra toppings do you want?"
    )
    expect(group.get_by_role("checkbox", name="Other…")).to_be_checked()
    group.get_by_role("textbox", name="Your answer").fill("Pineapple")
    group.get_by_role("button", name="Submit").click()
    expect(group.locator(".answer-typed")).to_have_text("typed Pineapple")


def test_free_form_focuses_the_box_and_enter_submits(page):
    log_in(page)
    new_conversation(page)
    group = ask(page, "name")
    expect(group.get_by_role("textbox", name="Your answer")).to_be_focused()
    page.keyboard.type("Apollo")
    page.keyboard.press("Enter")
    expect(last_reply(page)).to_contain_text("The project is now called Apollo.")


def test_a_typed_answer_of_several_lines_keeps_its_paragraphs(page):
    log_in(page)
    new_conversation(page)
    group = ask(page, "name")
    box = group.get_by_role("textbox", name="Your answer")
    box.fill("Apollo\n\nAfter the programme,\nnot the god.")
    box.press("Enter")
    typed = group.locator(".answer-typed")
    expect(typed.get_by_role("paragraph")).to_have_count(2)
    expect(typed.get_by_role("paragraph").first).to_have_text("Apollo")
    expect(typed.get_by_role("paragraph").last).to_contain_text("After the programme,")


def test_confirm_names_the_action_warns_and_explains_no_and_reject(page):
    log_in(page)
    new_conversation(page)
    group = ask(page, "delete")
    expect(group.get_by_role("heading", name="Delete 23 unused test files")).to_be_visible()
    expect(group.get_by_role("button", name="No")).to_be_focused()  # the tool's default
    expect(group.get_by_role("button", name="Yes")).to_have_class(re.compile("option-danger"))
    expect(group.get_by_role("button", name="Reject")).to_have_accessible_description(
        re.compile("leaves the question unanswered and stops the agent")
    )
    page.keyboard.press("Escape")
    expect(page.get_by_role("textbox", name="Message")).to_be_focused()
    group.get_by_role("button", name="No").focus()
    page.keyboard.press("ArrowLeft")
    expect(group.get_by_role("button", name="Yes")).to_be_focused()
    page.keyboard.press("Enter")
    expect(last_reply(page)).to_contain_text("You answered yes.")


def test_several_questions_answered_together_each_answer_under_its_question(page):
    log_in(page)
    new_conversation(page)
    group = ask(page, "setup")
    group.get_by_role("radio", name="SQLite").check()  # and on to the next question
    features = group.get_by_role("group", name="Which features should be enabled?")
    features.get_by_role("checkbox", name="Export").check()
    features.get_by_role("checkbox", name="Other…").check()
    features.get_by_role("textbox", name="Your answer").fill("Audit log")
    group.get_by_role("button", name="Next").click()
    group.get_by_role("button", name="Submit").click()
    # The scripted agent says the answers it got, in the questions' order.
    expect(last_reply(page)).to_contain_text("Setting up with SQLite; Export, Audit log.")
    items = group.locator(".question-item")
    expect(items.nth(0).locator(".question-answer")).to_have_text("Answer: SQLite")
    expect(items.nth(1).locator(".answer-choice")).to_have_text(["Export"])
    expect(items.nth(1).locator(".answer-typed")).to_have_text("typed Audit log")


def test_several_questions_with_the_keyboard_only(page):
    log_in(page)
    new_conversation(page)
    group = ask(page, "setup")
    expect(group.get_by_role("radio", name="PostgreSQL")).to_be_focused()
    page.keyboard.press("2")  # picks SQLite, and on to the next question
    expect(group.get_by_role("radio", name="SQLite", include_hidden=True)).to_be_checked()
    expect(group.get_by_role("checkbox", name="Search")).to_be_focused()
    page.keyboard.press("Space")
    page.keyboard.press("Control+Enter")
    expect(last_reply(page)).to_contain_text("Setting up with SQLite; Search.")


def test_a_reload_while_pending_shows_the_question_and_it_still_answers(page):
    log_in(page)
    new_conversation(page)
    ask(page, "pizza")
    page.reload()
    group = page.get_by_role("group", name="Pizza")
    expect(group.get_by_role("button", name="Margherita")).to_be_focused()
    group.get_by_role("button", name="Funghi").click()
    expect(last_reply(page)).to_contain_text("ordering: Funghi")


def test_a_double_click_sends_one_answer(page):
    log_in(page)
    new_conversation(page)
    group = ask(page, "pizza")
    group.get_by_role("button", name="Margherita").dblclick()
    expect(last_reply(page)).to_contain_text("ordering: Margherita")
    expect(page.locator(".message-user")).to_have_count(2)
    expect(page.locator(".message-tool")).to_have_count(1)


def hold_pushes(page) -> dict:
    """Route the page's websocket through the test: while `held["on"]`, nothing the server
    pushes reaches the page, as on a slow or briefly broken connection."""
    held = {"on": False}

    def route(ws):
        server = ws.connect_to_server()
        server.on_message(lambda message: None if held["on"] else ws.send(message))

    page.route_web_socket(re.compile(r"/ws/"), route)
    return held


def test_an_already_answered_question_says_so_in_the_block(page, console_errors):
    console_errors.expect("status of 409")  # the refusal, shown in the block
    held = hold_pushes(page)
    log_in(page)
    new_conversation(page)
    group = ask(page, "pizza")
    held["on"] = True
    # Answered elsewhere (another device) while this tab has not heard of it yet.
    url = group.locator("form").get_attribute("action")
    token = page.locator("input[name=csrfmiddlewaretoken]").first.input_value()
    answered = page.request.post(url, form={"q0": "Pepperoni", "csrfmiddlewaretoken": token})
    assert answered.ok
    group.get_by_role("button", name="Funghi").click()
    expect(group.get_by_role("alert")).to_have_text("This question was already answered.")
    held["on"] = False


def test_a_refused_stop_is_shown_beside_the_button(page, console_errors):
    console_errors.expect("status of 409")  # the refusal, shown beside the button
    held = hold_pushes(page)
    log_in(page)
    new_conversation(page)
    page.get_by_role("textbox", name="Message").fill("What time is it?")
    page.get_by_role("textbox", name="Message").press("Enter")
    stop = page.get_by_role("button", name="Stop")
    expect(stop).to_be_visible()
    held["on"] = True
    # The scripted turn ends, as the API says; this tab, which hears nothing, still shows Stop.
    conversation = re.search(r"/c/(\d+)/", page.url).group(1)
    wait_for(
        lambda: page.request.get(f"/api/v1/conversations/{conversation}").json()["state"] == "idle",
        20,
        "the turn to end",
    )
    expect(stop).to_be_visible()
    stop.click()
    expect(page.locator("#stop-alert")).to_have_text("The agent is not running.")


def test_a_network_failure_is_shown_and_the_answer_kept(page, context, console_errors):
    console_errors.expect("ERR_INTERNET_DISCONNECTED")
    console_errors.expect("WebSocket")
    console_errors.expect("htmx:")  # htmx reports the failed request; the page says it
    log_in(page)
    new_conversation(page)
    group = ask(page, "name")
    group.get_by_role("textbox", name="Your answer").fill("Apollo")
    context.set_offline(True)
    group.get_by_role("button", name="Submit").click()
    alert = group.get_by_role("alert")
    expect(alert).to_contain_text(
        "Parley could not be reached. Check your connection and try again."
    )
    expect(group.get_by_role("textbox", name="Your answer")).to_have_value("Apollo")
    context.set_offline(False)
    alert.get_by_role("button", name="Retry").click()  # the answer kept is sent as it was
    expect(last_reply(page)).to_contain_text("The project is now called Apollo.")


@pytest.mark.parametrize(
    ("locale", "texts"),
    [
        (
            "zh-CN",
            {
                "other": "其他…",
                "answer": "你的回答",
                "submit": "提交",
                "reject": "拒绝",
                "rejected": "已拒绝",
            },
        ),
        (
            "pt-BR",
            {
                "other": "Outra…",
                "answer": "Sua resposta",
                "submit": "Enviar resposta",
                "reject": "Recusar",
                "rejected": "Recusada",
            },
        ),
    ],
)
def test_the_question_block_in_each_language(open_page, parley_server, locale, texts):
    page = open_page(parley_server, locale=locale)
    page.goto("/")
    page.locator("#id_username").fill("demo")
    page.locator("#id_password").fill("demo")
    page.locator("form.stacked-form button").click()
    page.goto("/conversations/new/")
    page.locator("#composer-text").fill("toppings")
    page.locator("#composer-text").press("Enter")
    group = page.get_by_role("group", name="Toppings")
    group.get_by_role("checkbox", name=texts["other"]).check()
    expect(group.get_by_role("textbox", name=texts["answer"])).to_be_visible()
    expect(group.get_by_role("button", name=texts["submit"])).to_be_visible()
    group.get_by_role("button", name=texts["reject"]).click()
    expect(group.get_by_text(texts["rejected"])).to_be_visible()


VIEWPORTS = {
    "": {"viewport": {"width": 900, "height": 900}},
    "-phone": {"viewport": {"width": 390, "height": 844}, "is_mobile": True, "has_touch": True},
}


def scrolls_sideways(page) -> bool:
    return page.evaluate("document.documentElement.scrollWidth > window.innerWidth")


@pytest.mark.parametrize("suffix", list(VIEWPORTS))
def test_every_form_pending_and_resolved_passes_axe_and_is_photographed(
    open_page, parley_server, suffix, screenshots
):
    # The page's CSP allows no inline script; axe is injected for the scan only.
    page = open_page(parley_server, bypass_csp=True, **VIEWPORTS[suffix])
    log_in(page)
    for word, (_, shot) in FORMS.items():
        new_conversation(page)
        group = ask(page, word)
        if word == "pizza":
            group.get_by_role("button", name="Other…").click()
        assert axe_violations(page) == [], word
        assert not scrolls_sideways(page), word
        group.screenshot(path=str(screenshots / f"{shot}-pending{suffix}.png"))
        if word == "setup":
            group.get_by_role("radio", name="PostgreSQL").check()
            group.get_by_role("checkbox", name="Search").check()
            group.get_by_role("tab", name="Review").click()
            submit = group.get_by_role("button", name="Submit")
            submit.scroll_into_view_if_needed()
            expect(submit).to_be_in_viewport()
            submit.click()
        elif word == "name":
            group.get_by_role("textbox", name="Your answer").fill("Apollo")
            group.get_by_role("button", name="Submit").click()
        elif word == "toppings":
            group.get_by_role("checkbox", name="Olives").check()
            group.get_by_role("checkbox", name="Onions").check()
            group.get_by_role("checkbox", name="Other…").check()
            group.get_by_role("textbox", name="Your answer").fill("Pineapple")
            group.get_by_role("button", name="Submit").click()
        elif word == "delete":
            group.get_by_role("button", name="Reject").click()
        else:
            group.get_by_role("textbox", name="Your answer").fill("Calzone")
            group.get_by_role("button", name="Submit").click()
        expect(group.get_by_role("button")).to_have_count(0)
        expect(page.get_by_role("status").filter(has_text="replying")).to_have_count(0)
        assert axe_violations(page) == [], word
        assert not scrolls_sideways(page), word
        group.screenshot(path=str(screenshots / f"{shot}-resolved{suffix}.png"))
        page.get_by_role("link", name="All conversations").click()


def test_no_page_scrolls_sideways_on_a_phone_and_touch_shows_no_enter_hint(
    open_page, parley_server
):
    page = open_page(parley_server, **VIEWPORTS["-phone"])
    page.goto("/")
    assert not scrolls_sideways(page), "login"
    log_in(page)
    assert not scrolls_sideways(page), "conversations"
    new_conversation(page)
    assert not scrolls_sideways(page), "conversation"
    expect(page.get_by_text("Enter sends")).to_be_hidden()
    menu = user_menu(page)
    expect(menu.get_by_role("button", name="Log out")).to_be_in_viewport()
    menu.get_by_role("link", name="Settings").click()
    assert not scrolls_sideways(page), "settings"
    page.get_by_role("link", name="API tokens").click()
    assert not scrolls_sideways(page), "tokens"


def test_a_question_that_comes_while_typing_takes_no_keystrokes(context, page):
    """Typing never answers a question: one that arrives while the composer holds text stays
    where it is; it is announced, with "Answer ↑" and Alt+Up to go to it."""
    log_in(page)
    new_conversation(page)
    send(page, "Hello")
    expect(page.get_by_role("button", name="Regenerate reply")).to_be_visible()  # replied
    box = page.get_by_role("textbox", name="Message")
    box.fill("Half a thought")
    elsewhere = context.new_page()  # the question comes from another tab's message
    elsewhere.goto(page.url)
    ask(elsewhere, "pizza")
    group = page.get_by_role("group", name="Pizza", exact=True)
    expect(group).to_be_visible()
    announced = page.get_by_role("status").filter(has_text="The agent asked a question")
    expect(announced).to_be_attached()
    expect(box).to_be_focused()
    page.keyboard.press("1")
    expect(box).to_have_value("Half a thought1")
    jump = page.get_by_role("button", name="Answer ↑")
    expect(jump).to_be_visible()
    page.keyboard.press("Alt+ArrowUp")
    expect(group.get_by_role("button", name="Margherita")).to_be_focused()
    expect(jump).to_be_hidden()
    page.keyboard.press("2")
    expect(last_reply(page)).to_contain_text("ordering: Pepperoni")
    expect(box).to_have_value("Half a thought1")


def test_number_keys_never_answer_a_confirmation(page):
    log_in(page)
    new_conversation(page)
    group = ask(page, "delete")
    no = group.get_by_role("button", name="No")
    expect(no).to_be_focused()
    page.keyboard.press("1")  # "Yes", were number keys to answer it
    page.keyboard.press("Enter")  # the focused button itself
    expect(last_reply(page)).to_contain_text("You answered no.")
    expect(page.locator(".message-assistant").filter(has_text="You answered yes")).to_have_count(0)


def test_alt_up_reaches_the_waiting_question_wherever_the_focus_is(page):
    log_in(page)
    new_conversation(page)
    group = ask(page, "pizza")
    margherita = group.get_by_role("button", name="Margherita")
    expect(margherita).to_be_focused()  # it came while nothing was typed
    for elsewhere in (
        page.get_by_role("textbox", name="Message"),
        page.get_by_role("searchbox", name="Search"),
        page.get_by_role("link", name="New conversation"),
    ):
        elsewhere.focus()
        page.keyboard.press("Alt+ArrowUp")
        expect(margherita).to_be_focused()
