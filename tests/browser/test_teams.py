"""Teams in real browsers, one per person: the owner shares a conversation from its page,
members see it appear and follow it live, a participant answers, a viewer is refused (page,
API, websocket), assignment moves the count, removal closes the member's socket and stream
within 2 s, and a stranger finds nothing anywhere."""

import re
import uuid

import pytest
from playwright.sync_api import expect

from tests.browser.pages import axe_violations, log_in, new_conversation, poll, send

VIEWER_REFUSED = "You can only read this conversation: its owner shared it with you as a viewer."


@pytest.fixture
def people(parley_server):
    """Three users of this test's own: (name, password) for the owner, bob and vera."""
    names = [f"{who}{uuid.uuid4().hex[:6]}" for who in ("own", "bob", "vera")]
    parley_server.manage(
        "shell",
        "-c",
        "from django.contrib.auth.models import User\n"
        + "".join(f"User.objects.create_user({n!r}, password='pw-{n}')\n" for n in names),
    )
    return [(name, f"pw-{name}") for name in names]


@pytest.fixture
def tab(browser, parley_server):
    """`tab(person, **options)`: a signed-in tab of its own browser context (its own cookies),
    failing the test on a console error it did not expect."""
    contexts = []

    def open_tab(person, **options):
        context = browser.new_context(base_url=parley_server.url, locale="en-US", **options)
        context.set_default_timeout(10_000)
        contexts.append(context)
        page = context.new_page()
        log_in(page, *person)
        return page

    yield open_tab
    for context in contexts:
        context.close()


def ask_pizza(page):
    new_conversation(page)
    send(page, "Order a pizza")
    question = page.get_by_role("group", name="Pizza")
    expect(question).to_be_visible()
    return question


def conversation_id(page) -> int:
    return int(re.search(r"/c/(\d+)/", page.url).group(1))


def share(page, username: str, role: str) -> None:
    toggle = page.get_by_role("button", name="Share")
    dialog = page.get_by_role("dialog", name="Share this conversation")
    if toggle.get_attribute("aria-expanded") != "true":
        toggle.click()
    # Opened, and after each Add, the Username box has the focus for the next person.
    expect(dialog.get_by_role("textbox", name="Username")).to_be_focused()
    dialog.get_by_role("textbox", name="Username").fill(username)
    dialog.get_by_role("combobox", name="Role").select_option(label=role)
    dialog.get_by_role("button", name="Add").click()
    member = dialog.get_by_role("listitem").filter(has_text=username)
    expect(member).to_contain_text(role)
    expect(member.get_by_role("button", name="Remove")).to_be_visible()


def sidebar_link(page, title: str):
    return page.get_by_role("complementary", name="Your conversations").get_by_role(
        "link", name=re.compile(title)
    )


def counted(page, n: int) -> None:
    if n:
        expect(page).to_have_title(re.compile(rf"^\({n}\) "))
    else:
        expect(page).not_to_have_title(re.compile(r"^\("))


def test_a_participant_sees_it_appear_answers_and_assignment_moves_the_count(tab, people):
    owner, bob, _vera = people
    own_page = tab(owner)
    bob_page = tab(bob)
    question = ask_pizza(own_page)
    counted(own_page, 1)
    expect(sidebar_link(bob_page, "Order a pizza")).to_have_count(0)

    share(own_page, bob[0], "Participant")
    # Bob's sidebar shows it without a reload, with who shared it; his count includes it.
    expect(sidebar_link(bob_page, "Order a pizza")).to_contain_text(f"Shared by {owner[0]}")
    counted(bob_page, 1)

    own_inbox = own_page.context.new_page()
    own_inbox.goto("/questions/")
    expect(own_inbox.get_by_role("group", name="Pizza")).to_be_visible()
    bob_inbox = bob_page.context.new_page()
    bob_inbox.goto("/questions/")
    expect(bob_inbox.get_by_role("group", name="Pizza")).to_be_visible()

    # Assigned to Bob: it waits for him alone (count, inbox, sidebar marker).
    question.get_by_role("combobox", name="Assign to").select_option(label=bob[0])
    counted(own_page, 0)
    counted(bob_page, 1)
    expect(own_inbox.get_by_role("group", name="Pizza")).to_have_count(0)
    expect(bob_inbox.get_by_role("group", name="Pizza")).to_be_visible()
    marker = "[data-waiting-marker]"
    expect(sidebar_link(own_page, "Order a pizza").locator(marker)).to_be_hidden()
    expect(sidebar_link(bob_page, "Order a pizza").locator(marker)).to_be_visible()
    sidebar_link(bob_page, "Order a pizza").click()
    bob_question = bob_page.get_by_role("group", name="Pizza")
    expect(bob_question.get_by_role("combobox", name="Assign to")).to_have_value(re.compile(r"\d+"))
    # Back to everyone: both count it again.
    bob_question.get_by_role("combobox", name="Assign to").select_option(
        label="Everyone who can answer"
    )
    counted(own_page, 1)

    bob_question.get_by_role("button", name="Funghi").click()
    # Everyone sees the answer, who gave it, and the agent go on, live.
    expect(question).to_contain_text("Answer: Funghi")
    expect(question).to_contain_text(f"Answered by {bob[0]}")
    expect(own_page.locator(".message-assistant").last).to_contain_text("ordering: Funghi")
    counted(own_page, 0)
    counted(bob_page, 0)
    # Bob's messages carry his name on everyone's page (sent once the reply has ended).
    expect(bob_page.get_by_role("button", name="Send")).to_be_enabled(timeout=15_000)
    send(bob_page, "Thanks, team")
    expect(
        own_page.get_by_role("list", name="Transcript")
        .get_by_role("listitem")
        .filter(has=own_page.get_by_role("heading", name=bob[0], exact=True))
    ).to_contain_text("Thanks, team")


def test_a_viewer_reads_live_and_is_refused_in_the_page_the_api_and_the_websocket(
    tab, people, parley_server
):
    owner, _bob, vera = people
    own_page = tab(owner)
    vera_page = tab(vera)
    question = ask_pizza(own_page)
    share(own_page, vera[0], "Viewer")
    sidebar_link(vera_page, "Order a pizza").click()
    counted(vera_page, 0)  # a viewer answers nothing: nothing waits for her

    # No composer: she can read only. The question shows read-only: every control disabled,
    # no assignment, and a line saying who answers.
    expect(vera_page.get_by_role("textbox", name="Message")).to_have_count(0)
    expect(vera_page.get_by_text("You are a viewer of this conversation")).to_be_visible()
    vera_question = vera_page.get_by_role("group", name="Pizza")
    expect(vera_question.get_by_text("Only its owner and participants can answer")).to_be_visible()
    expect(vera_question.get_by_role("combobox", name="Assign to")).to_have_count(0)
    for name in ("Margherita", "Pepperoni", "Other…", "Reject"):
        expect(vera_question.get_by_role("button", name=name)).to_be_disabled()
    # Keys do nothing either: number 1 would pick Margherita for someone who may answer.
    vera_page.keyboard.press("1")
    # The server refuses her all the same: an answer posted past the page is a 403 in her words.
    cid = conversation_id(own_page)
    cookies = {c["name"]: c["value"] for c in vera_page.context.cookies()}
    call_id = vera_question.get_attribute("id").removeprefix("question-")
    posted = vera_page.request.post(
        f"/c/{cid}/questions/{call_id}/answer/",
        form={"q0": "Margherita"},
        headers={
            "X-CSRFToken": cookies["csrftoken"],
            "Referer": parley_server.url + "/",
            "HX-Request": "true",
        },
    )
    assert posted.status == 403
    assert VIEWER_REFUSED in posted.text()

    # The API: she reads, and sending is a 403 with the same words.
    read = vera_page.request.get(f"/api/v1/conversations/{cid}")
    assert read.status == 200
    refused = vera_page.request.post(
        f"/api/v1/conversations/{cid}/messages",
        data={"content": "let me write"},
        headers={"X-CSRFToken": cookies["csrftoken"], "Referer": parley_server.url + "/"},
    )
    assert refused.status == 403
    assert refused.json() == {"message": VIEWER_REFUSED}

    # Her websocket is open (she reads live) but carries nothing she could act with: the
    # owner's answer and the agent's reply reach her page.
    question.get_by_role("button", name="Pepperoni").click()
    expect(vera_question).to_contain_text("Answer: Pepperoni")
    expect(vera_page.locator(".message-assistant").last).to_contain_text("ordering: Pepperoni")
    assert own_page.get_by_role("group", name="Pizza").count() == 1


def test_removing_a_member_closes_their_socket_and_stream_within_two_seconds(tab, people):
    owner, bob, _vera = people
    own_page = tab(owner)
    bob_page = tab(bob)
    ask_pizza(own_page)
    share(own_page, bob[0], "Participant")
    cid = conversation_id(own_page)
    bob_page.goto(f"/c/{cid}/")
    expect(bob_page.get_by_role("group", name="Pizza")).to_be_visible()
    bob_page.evaluate(
        """(path) => {
            window.__sse = [];
            const source = new EventSource(path);
            for (const type of ["state_change", "gone", "revoked"]) {
                source.addEventListener(type, () => window.__sse.push(type));
            }
        }""",
        f"/api/v1/conversations/{cid}/events",
    )
    assert "state_change" in poll(bob_page, "window.__sse", lambda seen: seen, timeout=5)

    dialog = own_page.get_by_role("dialog", name="Share this conversation")
    dialog.get_by_role("listitem").filter(has_text=bob[0]).get_by_role(
        "button", name="Remove"
    ).click()
    expect(dialog.get_by_role("listitem").filter(has_text=bob[0])).to_have_count(0)
    gone = bob_page.get_by_role("alert").filter(has_text="You no longer have access")
    expect(gone).to_be_visible(timeout=2_000)
    assert "gone" in poll(bob_page, "window.__sse", lambda seen: "gone" in seen, timeout=2)
    # And it leaves his sidebar; the page itself is a 404 now.
    bob_page.goto(f"/c/{cid}/")
    expect(bob_page.get_by_role("heading", name="There is nothing here.")).to_be_visible()


def test_a_stranger_gets_404_everywhere(tab, people):
    owner, _bob, vera = people
    own_page = tab(owner)
    ask_pizza(own_page)
    cid = conversation_id(own_page)
    stranger = tab(vera)  # not a member
    assert stranger.goto(f"/c/{cid}/").status == 404
    assert stranger.request.get(f"/api/v1/conversations/{cid}").status == 404
    assert stranger.request.get(f"/api/v1/conversations/{cid}/events").status == 404
    stranger.goto("/conversations/")
    opened = stranger.evaluate(
        """(path) => new Promise((resolve) => {
            const socket = new WebSocket(`ws://${location.host}${path}`);
            socket.onopen = () => resolve("open");
            socket.onclose = () => resolve("closed");
        })""",
        f"/ws/conversations/{cid}/",
    )
    assert opened == "closed"
    expect(sidebar_link(stranger, "Order a pizza")).to_have_count(0)


@pytest.mark.parametrize("theme", ["light", "dark"])
@pytest.mark.parametrize("width", [1280, 390])
def test_the_share_dialog_and_an_assigned_question_pass_axe(tab, people, screenshots, width, theme):
    owner, bob, vera = people
    options = {
        "bypass_csp": True,  # axe is injected for the scan only
        "color_scheme": theme,
        "viewport": {"width": width, "height": 900},
    }
    page = tab(owner, **options)
    reader = tab(vera, **options)  # signed in while she has no conversation to land in
    question = ask_pizza(page)
    share(page, bob[0], "Participant")
    share(page, vera[0], "Viewer")
    dialog = page.get_by_role("dialog", name="Share this conversation")
    assert page.evaluate("document.documentElement.scrollWidth <= window.innerWidth")
    assert axe_violations(page) == []
    suffix = f"{width}-{theme}"
    dialog.screenshot(path=str(screenshots / f"share-dialog-{suffix}.png"), caret="initial")

    dialog.get_by_role("button", name="Close").click()
    expect(dialog).to_be_hidden()
    expect(page.get_by_role("button", name="Share")).to_be_focused()
    question.get_by_role("combobox", name="Assign to").select_option(label=bob[0])
    counted(page, 0)
    assert axe_violations(page) == []
    question.screenshot(path=str(screenshots / f"assigned-question-{suffix}.png"), caret="initial")
    page.screenshot(path=str(screenshots / f"shared-conversation-{suffix}.png"), caret="initial")

    # The viewer's reading of the same question: read-only, as clear in every theme and width.
    if width < 800:  # a phone: the sidebar is folded
        reader.get_by_role("button", name="Conversations").click()
    sidebar_link(reader, "Order a pizza").click()
    read_only = reader.get_by_role("group", name="Pizza")
    expect(read_only.get_by_role("button", name="Margherita")).to_be_disabled()
    assert axe_violations(reader) == []
    read_only.screenshot(path=str(screenshots / f"viewer-question-{suffix}.png"), caret="initial")
