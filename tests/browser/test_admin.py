"""The operators' admin in a real browser: the transcript readable and never clipped, search
over message text, the "waiting for an answer" filter and the JSON export."""

import json
import re
from pathlib import Path

import pytest
from playwright.sync_api import expect

from tests.browser.pages import log_in, new_conversation, send

LONG_WORD = "supercalifragilistic" * 20  # one 400-character word, no place to break

# Every element of the transcript must be inside the box of each ancestor that cuts off its
# overflow (overflow hidden or clip): nothing the operator should read is out of reach.
CLIPPED = """
(root) => {
  const cut = [];
  const all = [root, ...root.querySelectorAll("*")];
  for (const element of all) {
    const box = element.getBoundingClientRect();
    if (!box.width) continue;
    for (let up = element.parentElement; up; up = up.parentElement) {
      const style = getComputedStyle(up);
      if (!["hidden", "clip"].includes(style.overflowX)) continue;
      const frame = up.getBoundingClientRect();
      if (box.right > frame.right + 1 || box.left < frame.left - 1) {
        cut.push(`${element.tagName}.${element.className} in ${up.tagName}.${up.className}`);
      }
    }
  }
  const page = document.documentElement;
  if (page.scrollWidth > page.clientWidth) cut.push("the page scrolls sideways");
  return cut;
}
"""


@pytest.fixture(scope="module")
def operator(parley_server):
    parley_server.manage(
        "shell",
        "-c",
        "from django.contrib.auth import get_user_model; U = get_user_model(); "
        "U.objects.filter(username='operator').exists() or "
        "U.objects.create_superuser('operator', 'op@example.com', 'operator-pw-1')",
    )
    return "operator"


def conversation_id(page) -> int:
    return int(re.search(r"/c/(\d+)/", page.url)[1])


@pytest.fixture
def conversations(page):
    """As demo: one conversation with tool calls, an answered question and a pending one
    (and a long unbreakable line); another that is idle."""
    log_in(page)
    new_conversation(page)
    send(page, "What time is it?")
    expect(page.locator(".message-assistant").last).to_contain_text("Two tools, one turn.")
    send(page, f"Order a pizza {LONG_WORD}")
    page.get_by_role("group", name="Pizza").get_by_role("button", name="Pepperoni").click()
    expect(page.locator(".message-assistant").last).to_contain_text("ordering: Pepperoni")
    send(page, "Pick some toppings")
    expect(page.get_by_role("group", name="Toppings")).to_be_visible()
    waiting = conversation_id(page)
    page.get_by_role("link", name="All conversations").click()
    new_conversation(page)
    send(page, "hello")
    expect(page.locator(".message-assistant").last).to_contain_text("scripted")
    return waiting, conversation_id(page)


def admin_page(browser, parley_server, operator):
    context = browser.new_context(
        base_url=parley_server.url, locale="en-US", viewport={"width": 1280, "height": 900}
    )
    context.set_default_timeout(10_000)
    page = context.new_page()
    page.goto("/admin/")
    page.get_by_role("textbox", name="Username").fill(operator)
    page.get_by_role("textbox", name="Password").fill("operator-pw-1")
    page.get_by_role("button", name="Log in").click()
    expect(page.get_by_role("heading", name="Site administration")).to_be_visible()
    return page


def row(page, conversation: int):
    return page.locator(f"#result_list a[href*='/admin/chat/conversation/{conversation}/change/']")


def listed(page) -> set[int]:
    links = page.locator("#result_list a[href*='/admin/chat/conversation/']")
    return {
        int(re.search(r"/conversation/(\d+)/", h)[1])
        for h in links.evaluate_all("links => links.map(a => a.getAttribute('href'))")
    }


def test_the_transcript_is_readable_and_nothing_is_cut_off_at_1280(
    browser, parley_server, operator, conversations, screenshots
):
    waiting, _ = conversations
    page = admin_page(browser, parley_server, operator)
    page.goto(f"/admin/chat/conversation/{waiting}/change/")
    transcript = page.locator(".parley-transcript").first
    # Questions are cards with their status and answer.
    answered = transcript.locator(".parley-question").filter(has_text="Which pizza")
    expect(answered.locator(".parley-badge")).to_have_text("Answered")
    expect(answered).to_contain_text("Answer: Pepperoni")
    expect(answered.locator(".parley-audit")).to_contain_text("Answered by")
    pending = transcript.locator(".parley-question").filter(has_text="Which extra toppings")
    expect(pending.locator(".parley-badge")).to_have_text("Pending")
    # Tool calls, results and the raw JSON are folded away, one click from view.
    tool = transcript.locator("details.parley-tool").first
    expect(tool.locator("pre")).to_be_hidden()
    tool.locator("summary").click()
    expect(tool.locator("pre")).to_be_visible()
    raw = transcript.locator("details.parley-raw").last
    raw.get_by_text("Raw JSON").click()
    expect(raw.locator("pre")).to_contain_text('"questionResolution": "asked"')
    # Everything open, the longest lines included: nothing reaches past a box that hides it.
    page.evaluate("document.querySelectorAll('details').forEach(d => d.open = true)")
    expect(transcript.locator(".parley-plain").get_by_text(LONG_WORD[:40])).to_be_visible()
    assert transcript.evaluate(CLIPPED) == []
    # Photographed with the first tool call and its result open, the rest folded.
    page.evaluate(
        "document.querySelectorAll('.parley-raw').forEach(d => d.open = false);"
        "document.querySelectorAll('.parley-tool').forEach(d => "
        "d.open = d.querySelector('summary code').textContent === 'scripted-1-0')"
    )
    page.screenshot(path=str(screenshots / "admin-transcript.png"), full_page=True)
    page.context.close()


def test_search_filter_and_export(browser, parley_server, operator, conversations):
    waiting, idle = conversations
    page = admin_page(browser, parley_server, operator)
    page.goto("/admin/chat/conversation/")
    # A word of the pending question, found in the message text (not the title or owner).
    page.get_by_role("textbox", name="Search").fill("want")
    page.get_by_role("button", name="Search").click()
    expect(page).to_have_url(re.compile(r"\?q=want$"))  # the results page, not the one before
    expect(row(page, waiting)).to_have_count(1)
    assert idle not in listed(page)

    page.goto("/admin/chat/conversation/")
    page.locator("#changelist-filter").get_by_role("link", name="Yes").first.click()
    expect(page).to_have_url(re.compile(r"waiting=yes"))
    expect(row(page, waiting)).to_have_count(1)
    assert idle not in listed(page)

    page.locator(f"#result_list input[value='{waiting}']").check()
    page.get_by_role("combobox", name="Action:").select_option(
        label="Export selected conversations as JSON"
    )
    with page.expect_download() as download:
        page.get_by_role("button", name="Run").click()
    data = json.loads(Path(download.value.path()).read_text())
    [exported] = data["conversations"]
    assert exported["id"] == waiting and exported["agentState"] == "awaiting_user"
    texts = json.dumps(exported["messages"])
    assert "Which extra toppings do you want?" in texts
    assert "What time is it?" in texts
    page.context.close()


# 130 messages, each with one long unbreakable word; prints the conversation's id.
LONG_TRANSCRIPT = f"""
from django.contrib.auth.models import User
from chat import services
from tests.factories import add_message
conversation = services.create_conversation(owner=User.objects.get(username="demo"), title="Long")
for n in range(130):
    add_message(conversation.pk, f"text {{n}} end {LONG_WORD}")
print(conversation.pk)
"""


def test_a_long_transcript_pages_back_and_forth_and_nothing_is_cut_off(
    browser, parley_server, operator
):
    long = int(parley_server.manage("shell", "-v", "0", "-c", LONG_TRANSCRIPT))
    page = admin_page(browser, parley_server, operator)
    page.goto(f"/admin/chat/conversation/{long}/change/")
    transcript = page.locator(".parley-transcript").first
    expect(transcript).to_contain_text("Messages #30 to #129 of 130.")
    expect(transcript.locator(".parley-message")).to_have_count(100)
    page.get_by_role("link", name="Earlier messages").click()
    expect(page.get_by_role("heading", name="Transcript of Long")).to_be_visible()
    transcript = page.locator(".parley-transcript")
    expect(transcript.locator(".parley-message")).to_have_count(30)
    expect(transcript.locator(".parley-message").first).to_contain_text("text 0 end")
    assert transcript.evaluate(CLIPPED) == []
    page.get_by_role("link", name="Later messages").click()
    expect(page.locator(".parley-message").last).to_contain_text("text 129 end")
    page.get_by_role("link", name="Back to the conversation and its newest messages").click()
    expect(page).to_have_url(re.compile(rf"/admin/chat/conversation/{long}/change/$"))
    page.context.close()
