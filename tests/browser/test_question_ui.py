"""The question UI: keyboard-only answering, focus, accessibility scan, languages, reloads,
double clicks, and screenshots of every form for the README."""

import json
from pathlib import Path

import pytest
from playwright.sync_api import expect

from tests.browser.pages import log_in, new_conversation

ROOT = Path(__file__).resolve().parents[2]
AXE = ROOT / "tests" / "vendor" / "axe-core" / "axe.min.js"
SCREENSHOTS = ROOT / "docs" / "screenshots"

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
    page.get_by_role("textbox", name="Message").press("Enter")
    group = page.get_by_role("group", name=FORMS[word][0], exact=True)
    expect(group).to_be_visible()
    return group


def last_reply(page):
    return page.locator(".message-assistant").last


def test_single_choice_with_the_keyboard_only(page):
    log_in(page)
    new_conversation(page)
    group = ask(page, "pizza")
    expect(group.get_by_role("textbox", name="Your answer")).to_be_focused()
    page.keyboard.press("Shift+Tab")
    expect(group.get_by_role("button", name="Funghi")).to_be_focused()
    page.keyboard.press("ArrowUp")
    expect(group.get_by_role("button", name="Pepperoni")).to_be_focused()
    page.keyboard.press("Enter")
    expect(last_reply(page)).to_contain_text("ordering: Pepperoni")


def test_several_choices_with_space_and_ctrl_enter(page):
    log_in(page)
    new_conversation(page)
    group = ask(page, "toppings")
    page.keyboard.press("Shift+Tab")
    expect(group.get_by_role("checkbox", name="Extra cheese")).to_be_focused()
    page.keyboard.press("Space")
    page.keyboard.press("ArrowUp")
    page.keyboard.press("ArrowUp")
    expect(group.get_by_role("checkbox", name="Onions")).to_be_focused()
    page.keyboard.press("Space")
    page.keyboard.press("Control+Enter")
    expect(last_reply(page)).to_contain_text("Adding these toppings")
    expect(page.locator(".message-user").last).to_contain_text("Extra cheese")
    assert page.locator(".message-user").last.inner_text().splitlines()[-2:] == [
        "Onions",
        "Extra cheese",
    ]


def test_free_form_answer_and_enter_in_the_box_submits_the_typed_text(page):
    log_in(page)
    new_conversation(page)
    ask(page, "name")
    page.keyboard.type("Apollo")
    page.keyboard.press("Enter")
    expect(last_reply(page)).to_contain_text("The project is now called Apollo.")


def test_typed_text_wins_over_the_first_option_on_enter(page):
    log_in(page)
    new_conversation(page)
    ask(page, "pizza")
    page.keyboard.type("Calzone")
    page.keyboard.press("Enter")
    expect(last_reply(page)).to_contain_text("ordering: Calzone")


def test_confirm_focuses_the_default_and_escape_leaves_the_block(page):
    log_in(page)
    new_conversation(page)
    group = ask(page, "delete")
    expect(group.get_by_role("button", name="No")).to_be_focused()
    page.keyboard.press("Escape")
    expect(page.get_by_role("textbox", name="Message")).to_be_focused()
    group.get_by_role("button", name="No").focus()
    page.keyboard.press("ArrowLeft")
    expect(group.get_by_role("button", name="Yes")).to_be_focused()
    page.keyboard.press("Enter")
    expect(last_reply(page)).to_contain_text('"confirmed": true')


def test_several_questions_answered_together(page):
    log_in(page)
    new_conversation(page)
    group = ask(page, "setup")
    group.get_by_role("radio", name="SQLite").check()
    group.get_by_role("checkbox", name="Export").check()
    group.get_by_role("group", name="Which features should be enabled?").get_by_role(
        "textbox", name="Your answer"
    ).fill("Audit log")
    group.get_by_role("button", name="Submit").click()
    expect(last_reply(page)).to_contain_text('"Audit log"]}}')
    reply = last_reply(page).inner_text()
    answers = json.loads(reply[reply.index("{") : reply.rindex("}") + 1])
    assert answers == {
        "answers": {
            "Which database should the service use?": "SQLite",
            "Which features should be enabled?": ["Export", "Audit log"],
        }
    }


def test_several_questions_with_the_keyboard_only(page):
    log_in(page)
    new_conversation(page)
    group = ask(page, "setup")
    page.keyboard.press("Shift+Tab")
    expect(group.get_by_role("radio", name="SQLite")).to_be_focused()
    page.keyboard.press("Space")
    page.keyboard.press("ArrowDown")
    expect(group.get_by_role("checkbox", name="Search")).to_be_focused()
    page.keyboard.press("Space")
    page.keyboard.press("Control+Enter")
    expect(last_reply(page)).to_contain_text('"Search"]}}')
    assert '"Which database should the service use?": "SQLite"' in last_reply(page).inner_text()


def test_a_reload_while_pending_shows_the_question_and_it_still_answers(page):
    log_in(page)
    new_conversation(page)
    ask(page, "pizza")
    page.reload()
    group = page.get_by_role("group", name="Pizza")
    expect(group.get_by_role("textbox", name="Your answer")).to_be_focused()
    group.get_by_role("button", name="Funghi").click()
    expect(last_reply(page)).to_contain_text("ordering: Funghi")


def test_a_double_click_sends_one_answer(page, console_errors):
    console_errors.expect("status of 409")  # a second click that gets through is refused
    log_in(page)
    new_conversation(page)
    group = ask(page, "pizza")
    group.get_by_role("button", name="Margherita").dblclick()
    expect(last_reply(page)).to_contain_text("ordering: Margherita")
    expect(page.locator(".message-user")).to_have_count(2)
    expect(page.locator(".message-tool")).to_have_count(1)


@pytest.mark.parametrize(
    ("locale", "texts"),
    [
        ("zh-CN", {"answer": "你的回答", "submit": "提交", "reject": "拒绝", "rejected": "已拒绝"}),
        (
            "pt-BR",
            {
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
    page.locator(".list-header button").click()
    page.locator("#composer-text").fill("toppings")
    page.locator("#composer-text").press("Enter")
    group = page.get_by_role("group", name="Toppings")
    expect(group.get_by_role("textbox", name=texts["answer"])).to_be_visible()
    expect(group.get_by_role("button", name=texts["submit"])).to_be_visible()
    group.get_by_role("button", name=texts["reject"]).click()
    expect(group.get_by_text(texts["rejected"])).to_be_visible()


def axe_violations(page) -> list[dict]:
    page.add_script_tag(path=str(AXE))
    result = page.evaluate("async () => await axe.run(document)")
    return [
        {"id": v["id"], "impact": v["impact"], "nodes": [n["html"][:120] for n in v["nodes"]]}
        for v in result["violations"]
        if v["impact"] in ("serious", "critical")
    ]


def test_every_form_pending_and_resolved_passes_axe_and_is_photographed(open_page, parley_server):
    # The page's CSP allows no inline script; axe is injected for the scan only.
    page = open_page(parley_server, bypass_csp=True, viewport={"width": 900, "height": 900})
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    log_in(page)
    for word, (_, shot) in FORMS.items():
        new_conversation(page)
        group = ask(page, word)
        assert axe_violations(page) == [], word
        group.screenshot(path=str(SCREENSHOTS / f"{shot}-pending.png"))
        if word == "setup":
            group.get_by_role("radio", name="PostgreSQL").check()
            group.get_by_role("checkbox", name="Search").check()
            group.get_by_role("button", name="Submit").click()
        elif word == "name":
            group.get_by_role("textbox", name="Your answer").fill("Apollo")
            group.get_by_role("button", name="Submit").click()
        elif word == "toppings":
            group.get_by_role("checkbox", name="Olives").check()
            group.get_by_role("checkbox", name="Onions").check()
            group.get_by_role("button", name="Submit").click()
        elif word == "delete":
            group.get_by_role("button", name="Reject").click()
        else:
            group.get_by_role("button", name="Margherita").click()
        expect(group.get_by_role("button")).to_have_count(0)
        expect(page.get_by_role("status").filter(has_text="replying")).to_have_count(0)
        assert axe_violations(page) == [], word
        group.screenshot(path=str(SCREENSHOTS / f"{shot}-resolved.png"))
        page.get_by_role("link", name="All conversations").click()
