"""Every refusal is shown to the person who acted: a limit, a login lockout or a Redis outage
is an alert where they acted, and what they typed stays."""

import re
import time

from playwright.sync_api import expect

from tests.browser.pages import log_in, new_conversation, user_messages
from tests.live_server import RedisServer


def test_limits_and_lockouts_are_shown_where_the_person_acted(start_server, open_page):
    server = start_server(
        PARLEY_MESSAGES_PER_MINUTE="1",
        PARLEY_CONVERSATIONS_PER_MINUTE="1",
        PARLEY_LOGIN_FAILURES_PER_ACCOUNT="2",
    )
    guesser = open_page(server)
    for _ in range(2):
        guesser.goto("/login/")
        guesser.get_by_role("textbox", name="Username").fill("demo")
        guesser.get_by_role("textbox", name="Password").fill("wrong")
        guesser.get_by_role("button", name="Log in").click()
        expect(guesser.get_by_role("alert")).to_be_visible()
    guesser.get_by_role("textbox", name="Password").fill("demo")  # right, but locked
    guesser.get_by_role("button", name="Log in").click()
    expect(guesser.get_by_role("alert")).to_contain_text("Too many failed logins")

    # Another account is not locked.
    server.manage(
        "shell",
        "-c",
        "from django.contrib.auth.models import User; "
        "User.objects.create_user('ada', password='pw-ada-123')",
    )
    page = open_page(server)
    log_in(page, "ada", "pw-ada-123")
    # The rates count in fixed one-minute windows (core.limits): start early in one, so the
    # two messages and the two conversations below fall in the same window.
    if (left := 60 - time.time() % 60) < 20:
        time.sleep(left)
    new_conversation(page)
    box = page.get_by_role("textbox", name="Message")
    box.fill("hello")
    box.press("Enter")
    expect(page.locator(".message-user")).to_contain_text("hello")
    # Send is disabled while the agent replies: the second message goes once it is done.
    expect(page.get_by_role("button", name="Send")).to_be_enabled()
    box.fill("once more")
    box.press("Enter")
    # The composer's alert (other alerts on the page, such as Stop's, stay empty).
    expect(
        page.get_by_role("alert").filter(has_text="You sent too many messages in a minute")
    ).to_be_visible()
    expect(box).to_have_value("once more")

    new_conversation(page)
    page.get_by_role("textbox", name="Message").fill("A new start")  # refused: no page follows
    page.get_by_role("textbox", name="Message").press("Enter")
    expect(
        page.get_by_role("alert").filter(has_text="You started too many conversations")
    ).to_be_visible()


# Opens the person's live channel again and again from this tab until the server refuses one
# (close code 4429), keeping the others open: their other tabs holding every socket allowed.
HOLD_EVERY_SOCKET = """async () => {
  window.heldSockets = [];
  for (let i = 0; i < 200; i++) {
    const code = await new Promise((resolve) => {
      const socket = new WebSocket(`ws://${location.host}/ws/me/`);
      socket.onmessage = () => resolve(0);
      socket.onclose = (event) => resolve(event.code);
      window.heldSockets.push(socket);
    });
    if (code) { return code; }
  }
  return 0;
}"""


def test_a_page_past_the_users_socket_limit_says_so(context, page):
    log_in(page)
    others = context.new_page()
    others.goto("/")
    assert others.evaluate(HOLD_EVERY_SOCKET) == 4429
    late = context.new_page()  # one tab more: its socket finds no place left
    late.goto("/")
    refusal = late.get_by_role("alert").filter(has_text="Too many Parley tabs are open")
    expect(refusal).to_be_visible()

    others.evaluate("() => window.heldSockets.forEach((socket) => socket.close())")
    others.close()
    late.reload()
    expect(refusal).to_be_hidden()
    new_conversation(late)  # the page works again


def test_a_message_sent_while_redis_is_down_says_to_try_again_in_a_moment(
    start_server, open_page, tmp_path
):
    redis = RedisServer(tmp_path / "redis")
    redis.start()
    try:
        # The default rate: each message is counted in Redis.
        server = start_server(REDIS_URL=redis.url, PARLEY_MESSAGES_PER_MINUTE="30")
        page = open_page(server)
        log_in(page)
        new_conversation(page)
        redis.stop()
        page.get_by_role("textbox", name="Message").fill("hello")
        page.get_by_role("textbox", name="Message").press("Enter")
        expect(page.get_by_role("alert").filter(has_text="Try again in a moment")).to_be_visible()
        expect(page.get_by_role("textbox", name="Message")).to_have_value("hello")
    finally:
        redis.stop()


def test_a_message_that_could_not_be_sent_keeps_its_text_and_offers_retry(open_page, parley_server):
    page = open_page(parley_server)
    log_in(page)
    new_conversation(page)
    page.context.set_offline(True)
    page.get_by_role("textbox", name="Message").fill("Sent while offline")
    page.get_by_role("textbox", name="Message").press("Enter")
    alert = page.locator("#composer-error")
    expect(alert).to_contain_text(
        "Not sent: Parley could not be reached. Your message is kept here."
    )
    expect(page.get_by_role("textbox", name="Message")).to_have_value("Sent while offline")
    page.context.set_offline(False)
    alert.get_by_role("button", name="Retry").click()
    # The first message made the conversation, whose page follows.
    expect(page).to_have_url(re.compile(r"/c/\d+/$"))
    expect(user_messages(page).last).to_contain_text("Sent while offline")
    expect(page.get_by_role("textbox", name="Message")).to_have_value("")
    expect(alert).to_be_empty()


# What a proxy or Django sends for an error the page did not ask for: whole pages.
ERROR_PAGES = {
    404: "<!doctype html><html><head><title>Not found</title></head><body><h1>Not found</h1>",
    413: "<html><head><title>413 Request Entity Too Large</title></head><body>nginx</body></html>",
    502: "<html><head><title>502 Bad Gateway</title></head><body>nginx</body></html>",
}


def answer_posts_with(status: int, body: str):
    def handle(route, request):
        if request.method != "POST":
            return route.continue_()
        return route.fulfill(status=status, body=body, content_type="text/html")

    return handle


def test_an_error_page_never_replaces_the_composer_and_the_text_is_kept(open_page, parley_server):
    page = open_page(parley_server)
    log_in(page)
    new_conversation(page)
    composer = page.get_by_role("textbox", name="Message")
    alert = page.locator("#composer-error")
    for status, body in ERROR_PAGES.items():
        page.route("**/conversations/new/", answer_posts_with(status, body))
        composer.fill(f"Kept through a {status}")
        composer.press("Enter")
        expect(alert).to_contain_text("Not sent: Parley could not take this message.")
        expect(composer).to_have_value(f"Kept through a {status}")
        expect(
            page.get_by_role("heading", name=re.compile("Not found|Bad Gateway|413"))
        ).to_have_count(0)
        page.unroute("**/conversations/new/")
    alert.get_by_role("button", name="Retry").click()
    expect(page).to_have_url(re.compile(r"/c/\d+/$"))
    expect(user_messages(page).last).to_contain_text("Kept through a 502")
