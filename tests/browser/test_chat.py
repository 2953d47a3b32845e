"""The walking skeleton as a person uses it: real Chromium, real daphne, roles and names."""

import re

import pytest
from playwright.sync_api import expect

from tests.browser.pages import (
    log_in,
    new_conversation,
    send,
    transcript_items,
    user_menu,
    user_messages,
    watch_text,
)

FINAL_MARK = "two tools in one turn."


def test_log_in_chat_and_watch_the_reply_stream_into_two_tabs(context, page):
    log_in(page)
    new_conversation(page)
    # The first message creates the conversation: the page moves to its address.
    send(page, "Hi")
    expect(page.locator(".message-assistant")).to_contain_text("Hello! I'm Parley")
    expect(page.get_by_role("button", name="Regenerate reply")).to_be_visible()  # replied
    second_tab = context.new_page()
    second_tab.goto(page.url)
    expect(transcript_items(second_tab)).to_have_count(2)

    page.get_by_role("textbox", name="Message").fill("Good morning, Parley")
    page.get_by_role("textbox", name="Message").press("Enter")

    expect(page.get_by_role("textbox", name="Message")).to_have_value("")
    expect(user_messages(page).filter(has_text="Good morning, Parley")).to_have_count(1)
    reply = page.locator(".message-assistant").last
    seen = watch_text(reply, FINAL_MARK)
    # Streamed: the reply grew in front of the user, word by word.
    assert len(seen) >= 3, seen
    assert "scripted demo agent" in seen[-1]
    assert "You said: “Good morning, Parley” (message 2 of this chat)" in seen[-1]

    # The other tab saw all of it live, without a reload.
    expect(second_tab.locator(".message-assistant").last).to_contain_text(FINAL_MARK)
    expect(transcript_items(second_tab)).to_have_count(4)

    # And the other way round: a message from the second tab shows up in the first.
    expect(second_tab.get_by_role("status").filter(has_text="replying")).to_have_count(0)
    second_tab.get_by_role("textbox", name="Message").fill("From the other tab")
    second_tab.get_by_role("button", name="Send").click()
    expect(user_messages(page).filter(has_text="From the other tab")).to_have_count(1)
    expect(page.locator(".message-assistant").last).to_contain_text("(message 3 of this chat)")
    expect(transcript_items(page)).to_have_count(6)

    # The conversation is on the list, named after its first message.
    page.get_by_role("link", name="All conversations").click()
    expect(page.get_by_role("link", name="Hi", exact=True)).to_be_visible()


def test_shift_enter_adds_a_line_and_enter_sends(page):
    log_in(page)
    new_conversation(page)
    box = page.get_by_role("textbox", name="Message")
    box.fill("line one")
    box.press("Shift+Enter")
    box.press_sequentially("line two")
    expect(box).to_have_value("line one\nline two")
    expect(transcript_items(page).filter(has_text="line one")).to_have_count(0)
    box.press("Enter")
    # The user's message (the agent's echo of it, which may already be there, is not).
    sent = (
        transcript_items(page)
        .filter(has=page.get_by_role("heading", name="You", exact=True))
        .filter(has_text="line one")
    )
    expect(sent).to_have_count(1)
    assert sent.inner_text().splitlines()[-2:] == ["line one", "line two"]


def test_empty_message_shows_an_inline_error(page, console_errors):
    console_errors.expect("status of 400 (Bad Request)")  # the refusal itself
    log_in(page)
    new_conversation(page)
    page.get_by_role("textbox", name="Message").fill("   ")
    page.get_by_role("button", name="Send").click()
    expect(page.get_by_role("alert")).to_have_text("Type a message first.")
    expect(page.get_by_role("textbox", name="Message")).to_be_focused()
    expect(transcript_items(page).filter(has_text="Type a message")).to_have_count(0)


def test_wrong_password_is_refused_clearly(page):
    page.goto("/")
    page.get_by_role("textbox", name="Username").fill("demo")
    page.get_by_role("textbox", name="Password").fill("nope")
    page.get_by_role("button", name="Log in").click()
    expect(page.get_by_role("alert")).to_contain_text("correct username and password")


def test_the_page_follows_the_browser_language_and_the_switcher(open_page, parley_server):
    page = open_page(parley_server, locale="zh-CN")
    page.goto("/")
    expect(page.get_by_role("button", name="登录")).to_be_visible()
    page.get_by_role("combobox", name="语言").select_option("pt-br")
    expect(page.get_by_role("button", name="Entrar")).to_be_visible()
    page.get_by_role("textbox", name="Nome de usuário").fill("demo")
    page.get_by_role("textbox", name="Senha").fill("demo")
    page.get_by_role("button", name="Entrar").click()
    expect(page.get_by_role("textbox", name="Mensagem")).to_be_focused()  # ready to write
    page.get_by_role("link", name="Nova conversa").click()
    expect(page.get_by_role("textbox", name="Mensagem")).to_be_visible()
    expect(page.get_by_role("button", name="Enviar")).to_be_visible()


@pytest.fixture
def own_server(start_server):
    return start_server()


def test_after_a_server_restart_the_page_reconnects_and_catches_up(open_page, own_server):
    page = open_page(own_server, locale="en-US")
    log_in(page)
    new_conversation(page)
    page.get_by_role("textbox", name="Message").fill("Before the restart")
    page.get_by_role("textbox", name="Message").press("Enter")
    expect(page.locator(".message-assistant")).to_contain_text(FINAL_MARK)
    conversation_id = int(re.search(r"/c/(\d+)/", page.url).group(1))

    own_server.stop(kill=True)
    expect(page.get_by_text("Connection lost. Reconnecting…")).to_be_visible()
    # While the page is cut off, the transcript changes behind its back.
    own_server.manage(
        "shell",
        "-v",
        "0",
        "-c",
        "from tests.factories import add_message; "
        f"add_message({conversation_id}, 'Written while you were away')",
    )
    own_server.start()

    expect(transcript_items(page).filter(has_text="Written while you were away")).to_have_count(
        1, timeout=20_000
    )
    expect(page.get_by_text("Connection lost. Reconnecting…")).to_be_hidden()
    # No gap and no duplicate: exactly what a fresh load shows.
    expect(transcript_items(page)).to_have_count(3)
    page.reload()
    expect(transcript_items(page)).to_have_count(3)


def test_a_multi_tool_turn_shows_each_call_its_result_and_the_answer(page):
    log_in(page)
    new_conversation(page)
    page.get_by_role("textbox", name="Message").fill("What time is it?")
    page.get_by_role("textbox", name="Message").press("Enter")
    answer = page.locator(".message-assistant").last
    expect(answer).to_contain_text("6 × 7 = 42", timeout=15_000)
    expect(page.get_by_text("Used the tool current_time")).to_be_visible()
    expect(page.get_by_text("Used the tool calculate")).to_be_visible()
    expect(page.get_by_text("Tool result")).to_have_count(2)
    expect(page.get_by_role("button", name="Stop")).to_have_count(0)


def test_stop_ends_the_reply_and_keeps_its_text(open_page, start_server):
    server = start_server(SCRIPTED_AGENT_DELAY="0.25")
    page = open_page(server, locale="en-US")
    log_in(page)
    new_conversation(page)
    page.get_by_role("textbox", name="Message").fill("Tell me everything")
    page.get_by_role("textbox", name="Message").press("Enter")
    reply = page.locator(".message-assistant").first  # the conversation's only reply so far
    expect(reply).to_contain_text("You said:")
    page.get_by_role("button", name="Stop").click()
    expect(page.get_by_role("button", name="Stop")).to_have_count(0)
    kept = reply.inner_text()
    assert "You said:" in kept
    assert FINAL_MARK not in kept
    # The conversation is usable again at once (a turn still running would refuse the message),
    # and its next reply comes after anything more of the stopped one: nothing more came.
    page.get_by_role("textbox", name="Message").fill("Hello again")
    page.get_by_role("textbox", name="Message").press("Enter")
    expect(page.locator(".message-assistant").last).to_contain_text("scripted", timeout=20_000)
    assert reply.inner_text() == kept


def test_an_openai_compatible_endpoint_works_end_to_end(open_page, start_server):
    from tests.fake_llm import FakeLLM

    llm = FakeLLM()
    llm.queue(
        {
            "text": "Let me compute.",
            "tool_calls": [
                {"id": "call_1", "name": "calculate", "arguments": '{"expression": "19 * 23"}'}
            ],
        },
        {"text": "19 × 23 is **437**."},
    )
    server = start_server(
        AGENT_PROVIDER="openai", OPENAI_BASE_URL=f"{llm.url}/v1", OPENAI_API_KEY="sk-test"
    )
    page = open_page(server, locale="en-US")
    try:
        log_in(page)
        new_conversation(page)
        page.get_by_role("textbox", name="Message").fill("What is 19 times 23?")
        page.get_by_role("textbox", name="Message").press("Enter")
        expect(page.locator(".message-assistant").last).to_contain_text("19 × 23 is 437.")
        expect(page.get_by_text("Used the tool calculate")).to_be_visible()
        assert llm.requests[1]["body"]["messages"][-1] == {
            "role": "tool",
            "tool_call_id": "call_1",
            "content": "437",
        }
    finally:
        llm.close()


def test_logging_in_lands_on_a_ready_composer_and_the_first_message_creates_the_conversation(
    page, person
):
    log_in(page, *person)
    # Nobody has written yet: a blank composer, ready, and no conversation made for it.
    expect(page).to_have_url(re.compile(r"/conversations/new/$"))
    expect(page.get_by_role("heading", name="New conversation", level=1)).to_be_visible()
    expect(page.get_by_role("textbox", name="Message")).to_be_focused()
    sidebar = page.get_by_role("complementary", name="Your conversations")
    new_conversation(page)
    new_conversation(page)
    expect(sidebar.get_by_text("No conversations yet.")).to_be_visible()

    send(page, "Plan a picnic")
    expect(page).to_have_url(re.compile(r"/c/\d+/$"))
    conversation_url = page.url
    expect(page.get_by_role("heading", name="Plan a picnic", level=1)).to_be_visible()
    expect(sidebar.get_by_role("link", name="Plan a picnic")).to_have_attribute(
        "aria-current", "page"
    )
    expect(page.locator(".message-assistant")).to_contain_text("Plan a picnic")
    page.goto("/conversations/")
    listed = page.get_by_role("list", name="Your conversations").get_by_role("listitem")
    expect(listed).to_have_count(1)

    # Signed in again: back in the newest conversation, ready to write, not on a list.
    user_menu(page, person[0]).get_by_role("button", name="Log out").click()
    log_in(page, *person)
    assert page.url == conversation_url
    expect(page.get_by_role("textbox", name="Message")).to_be_focused()
