"""The user's live channel in a real browser: the Questions inbox, the tab title and icon,
browser notifications, and the conversation sidebar (search, waiting markers)."""

import re

import pytest
from playwright.sync_api import expect

from tests.browser.pages import axe_violations, log_in, new_conversation, poll, send, user_menu

# Records every Notification the page makes (permission is granted by the browser context).
RECORD_NOTIFICATIONS = """
window.__notifications = [];
window.Notification = class extends window.Notification {
  constructor(title, options) {
    super(title, options);
    window.__notifications.push({title: title, body: options.body, tag: options.tag, self: this});
  }
};
"""
# A tab in the background (headless tabs are always visible otherwise).
HIDDEN = """
Object.defineProperty(document, "visibilityState", {get: () => "hidden"});
Object.defineProperty(document, "hidden", {get: () => true});
"""


def questions_link(page):
    return page.get_by_role("banner").get_by_role("link", name=re.compile(r"^Questions"))


def ask_pizza(page):
    new_conversation(page)
    send(page, "Order a pizza")
    question = page.get_by_role("group", name="Pizza")
    expect(question).to_be_visible()
    return question


def test_the_inbox_answers_another_conversations_question_and_it_goes_live_elsewhere(
    context, page, person
):
    log_in(page, *person)
    ask_pizza(page)
    conversation_url = page.url
    expect(questions_link(page)).to_have_text("Questions 1")

    inbox = context.new_page()
    inbox.goto("/questions/")
    second = context.new_page()
    second.goto("/questions/")
    expect(inbox.get_by_role("heading", name="Questions")).to_be_visible()
    items = inbox.get_by_role("list", name="Pending questions").get_by_role("listitem")
    expect(items).to_have_count(1)
    expect(items.get_by_role("link", name="Order a pizza")).to_have_attribute(
        "href", re.compile(r"^/c/\d+/#question-")
    )
    expect(second.get_by_role("group", name="Pizza")).to_be_visible()

    inbox.get_by_role("group", name="Pizza").get_by_role("button", name="Pepperoni").click()
    expect(inbox.get_by_role("group", name="Pizza")).to_have_count(0)
    expect(inbox.get_by_text("No questions are waiting for you.")).to_be_visible()
    # The second tab and the conversation itself follow, without a reload.
    expect(second.get_by_role("group", name="Pizza")).to_have_count(0)
    expect(second.get_by_text("No questions are waiting for you.")).to_be_visible()
    expect(questions_link(second)).to_have_text("Questions")
    expect(page.get_by_role("group", name="Pizza")).to_contain_text("Answer: Pepperoni")
    assert page.url == conversation_url

    # A question asked elsewhere appears in both.
    ask_pizza(page)
    expect(inbox.get_by_role("group", name="Pizza")).to_be_visible()
    expect(second.get_by_role("group", name="Pizza")).to_be_visible()
    expect(second.get_by_text("No questions are waiting for you.")).to_be_hidden()
    expect(questions_link(second)).to_have_text("Questions 1")


def test_an_empty_answer_from_the_inbox_is_named_in_the_block(context, page, person):
    log_in(page, *person)
    new_conversation(page)
    send(page, "Pick some toppings")
    expect(page.get_by_role("group", name="Toppings")).to_be_visible()
    inbox = context.new_page()
    inbox.goto("/questions/")
    group = inbox.get_by_role("group", name="Toppings")
    group.get_by_role("button", name="Submit").click()  # nothing chosen
    expect(group.get_by_role("alert")).to_have_text(
        "Missing an answer to: Which extra toppings do you want?"
    )
    group.get_by_role("checkbox", name="Olives").check()
    group.get_by_role("button", name="Submit").click()
    expect(group).to_have_count(0)
    expect(page.get_by_role("group", name="Toppings")).to_contain_text("Answer: Olives")


def test_the_tab_title_counts_waiting_questions(context, page, person):
    log_in(page, *person)
    other = context.new_page()
    other.goto("/conversations/")
    expect(other).to_have_title("Conversations · Parley")
    question = ask_pizza(page)
    expect(page).to_have_title(re.compile(r"^\(1\) "))
    expect(other).to_have_title("(1) Conversations · Parley")
    expect(other.locator("link[rel~=icon]")).to_have_attribute(
        "href", re.compile("favicon-pending")
    )
    # A new plain title (a rename) keeps the count in front.
    other.evaluate("document.title = 'Renamed · Parley'")
    expect(other).to_have_title("(1) Renamed · Parley")

    question.get_by_role("button", name="Funghi").click()
    expect(other).to_have_title("Renamed · Parley")
    expect(page).not_to_have_title(re.compile(r"^\("))
    expect(other.locator("link[rel~=icon]")).to_have_attribute("href", re.compile(r"favicon\.svg"))


@pytest.fixture
def granted(browser, parley_server):
    """A browser context where Parley may notify, recording every Notification made."""
    context = browser.new_context(base_url=parley_server.url, locale="en-US")
    context.grant_permissions(["notifications"], origin=parley_server.url)
    context.add_init_script(RECORD_NOTIFICATIONS)
    yield context
    context.close()


def background_tab(context):
    tab = context.new_page()
    tab.add_init_script(HIDDEN)
    tab.goto("/conversations/")
    expect(tab.get_by_role("heading", name="Conversations")).to_be_visible()
    return tab


def test_a_question_asked_while_the_tab_is_hidden_notifies_once_and_leads_to_it(granted, person):
    page = granted.new_page()
    log_in(page, *person)
    # Opting in is a setting.
    user_menu(page, person[0]).get_by_role("link", name="Settings").click()
    page.get_by_role("switch", name="Browser notifications").check()
    expect(page.get_by_role("status").filter(has_text="Settings saved.")).to_be_visible()

    background = background_tab(granted)
    page.goto("/")
    ask_pizza(page)
    expect(questions_link(background)).to_have_text("Questions 1")
    notified = poll(background, "window.__notifications.length", bool, timeout=10)
    assert notified, "no notification within 10 s of asking"
    shown = background.evaluate(
        "window.__notifications.map(n => ({title: n.title, body: n.body, tag: n.tag}))"
    )
    assert len(shown) == 1
    assert shown[0]["title"] == "Parley is waiting for your answer"
    assert shown[0]["body"] == "Order a pizza: Pizza"
    # The visible tab where it was asked does not notify.
    assert page.evaluate("window.__notifications.length") == 0

    background.evaluate("window.__notifications[0].self.onclick()")
    expect(background).to_have_url(re.compile(r"/c/\d+/#question-"))
    background.bring_to_front()  # what window.focus() does for a real window
    group = background.get_by_role("group", name="Pizza")
    expect(group.get_by_role("button", name="Margherita")).to_be_focused()


def test_without_the_setting_nothing_notifies(granted, person):
    page = granted.new_page()
    log_in(page, *person)
    background = background_tab(granted)
    ask_pizza(page)
    # The count arrives in the same push that would notify.
    expect(questions_link(background)).to_have_text("Questions 1")
    assert background.evaluate("window.__notifications.length") == 0


def test_the_sidebar_search_finds_a_word_inside_a_message(page, person):
    log_in(page, *person)
    new_conversation(page)
    send(page, "Tell me about aardvarks")
    expect(page.locator(".message-assistant")).to_contain_text("aardvarks")
    expect(page.get_by_role("status").filter(has_text="replying")).to_have_count(0)
    new_conversation(page)
    send(page, "Something else")
    sidebar = page.get_by_role("complementary", name="Your conversations")
    # The new conversation's title (from its first message) shows there at once.
    expect(sidebar.get_by_role("link", name="Something else")).to_have_attribute(
        "aria-current", "page"
    )
    sidebar.get_by_role("searchbox", name="Search").fill("aardvarks")
    results = sidebar.get_by_role("list", name="Search results")
    expect(results.get_by_role("link")).to_have_count(1)
    expect(results.get_by_role("link", name="Tell me about aardvarks")).to_be_visible()
    sidebar.get_by_role("searchbox", name="Search").fill("zebras")
    expect(sidebar.get_by_text("Nothing matches your search.")).to_be_visible()


def test_the_waiting_marker_appears_live_when_a_question_is_asked_in_another_tab(
    context, page, person, screenshots
):
    log_in(page, *person)
    other = context.new_page()
    other.goto("/")
    new_conversation(other)
    send(other, "Plan the team lunch")
    expect(other.locator(".message-assistant")).to_contain_text("Plan the team lunch")
    expect(other.get_by_role("status").filter(has_text="replying")).to_have_count(0)
    new_conversation(page)
    send(page, "Hello there")
    expect(page.get_by_role("button", name="Regenerate reply")).to_be_visible()  # replied
    watching = page.url
    sidebar = page.get_by_role("complementary", name="Your conversations")
    row = sidebar.get_by_role("listitem").filter(has_text="Plan the team lunch")
    expect(row.get_by_text("Waiting for your answer")).to_be_hidden()

    send(other, "Now order a pizza")
    question = other.get_by_role("group", name="Pizza")
    expect(question).to_be_visible()
    expect(row.get_by_text("Waiting for your answer")).to_be_visible()
    expect(row.get_by_role("link")).to_have_accessible_name(
        "Plan the team lunch Waiting for your answer"
    )
    expect(
        sidebar.get_by_role("paragraph").filter(has_text="Waiting for your answer: 1")
    ).to_be_visible()
    here = sidebar.get_by_role("listitem").filter(has_text="Hello there")
    expect(here.get_by_text("Waiting for your answer")).to_be_hidden()
    assert page.url == watching
    page.set_viewport_size({"width": 1280, "height": 800})
    page.screenshot(path=str(screenshots / "sidebar.png"), caret="initial")

    question.get_by_role("button", name="Margherita").click()
    expect(row.get_by_text("Waiting for your answer")).to_be_hidden()
    expect(
        sidebar.get_by_role("paragraph").filter(has_text="Waiting for your answer: 1")
    ).to_be_hidden()


def test_on_a_phone_the_sidebar_folds_behind_a_button(browser, parley_server, person, screenshots):
    context = browser.new_context(
        base_url=parley_server.url, locale="en-US", viewport={"width": 390, "height": 844}
    )
    try:
        page = context.new_page()
        log_in(page, *person)
        ask_pizza(page)
        toggle = page.get_by_role("button", name="Conversations")
        expect(toggle).to_have_attribute("aria-expanded", "false")
        expect(toggle).to_contain_text("1")
        sidebar = page.get_by_role("complementary", name="Your conversations")
        expect(sidebar.get_by_role("searchbox", name="Search")).to_be_hidden()
        toggle.click()
        expect(toggle).to_have_attribute("aria-expanded", "true")
        expect(sidebar.get_by_role("searchbox", name="Search")).to_be_visible()
        expect(sidebar.get_by_role("link", name=re.compile("Order a pizza"))).to_be_visible()
        no_sideways_scroll = "document.documentElement.scrollWidth <= window.innerWidth"
        assert page.evaluate(no_sideways_scroll)
        page.screenshot(path=str(screenshots / "sidebar-phone.png"), caret="initial")
        page.goto("/questions/")
        expect(page.get_by_role("group", name="Pizza")).to_be_visible()
        assert page.evaluate(no_sideways_scroll)
        page.screenshot(path=str(screenshots / "inbox-phone.png"), caret="initial")
    finally:
        context.close()


def test_the_inbox_lists_every_waiting_question(context, page, person, screenshots):
    log_in(page, *person)
    ask_pizza(page)
    new_conversation(page)
    send(page, "Pick some toppings")
    expect(page.get_by_role("group", name="Toppings")).to_be_visible()
    page.set_viewport_size({"width": 1280, "height": 900})
    page.get_by_role("banner").get_by_role("link", name="Questions 2").click()
    expect(page.get_by_role("main").get_by_role("group")).to_have_count(2)
    page.screenshot(path=str(screenshots / "inbox.png"), full_page=True, caret="initial")


@pytest.mark.parametrize("width", [1280, 390])
def test_the_inbox_and_the_sidebar_pass_axe(open_page, parley_server, person, width):
    page = open_page(parley_server, bypass_csp=True, viewport={"width": width, "height": 900})
    log_in(page, *person)
    ask_pizza(page)
    toggle = page.get_by_role("button", name="Conversations")
    if width < 900:
        toggle.click()  # the folded sidebar's content is scanned too
    waiting = page.get_by_role("complementary").get_by_role("paragraph")
    expect(waiting.filter(has_text="Waiting for your answer: 1")).to_be_visible()
    assert axe_violations(page) == []
    page.get_by_role("banner").get_by_role("link", name="Questions 1").click()
    expect(page.get_by_role("group", name="Pizza")).to_be_visible()
    assert axe_violations(page) == []


def test_ticking_the_setting_asks_for_permission_and_says_when_it_is_refused(
    browser, parley_server, person
):
    context = browser.new_context(base_url=parley_server.url, locale="en-US")
    try:
        page = context.new_page()
        log_in(page, *person)
        page.goto("/settings/")
        page.evaluate(
            "Notification.requestPermission = () => { window.__asked = true;"
            " return Promise.resolve('denied'); }"
        )
        page.get_by_role("switch", name="Browser notifications").check()
        expect(page.get_by_role("alert")).to_contain_text("Your browser blocks notifications")
        assert page.evaluate("window.__asked") is True
    finally:
        context.close()


def test_a_reminder_before_the_deadline_notifies_a_hidden_tab(browser, start_server):
    """Reminders take the notification path too: with a deadline, a hidden tab is told once
    when the question is asked and once more before it expires."""
    server = start_server(QUESTION_EXPIRE_AFTER="8", PARLEY_SWEEP_SECONDS="0.3")
    context = browser.new_context(base_url=server.url, locale="en-US")
    try:
        context.grant_permissions(["notifications"], origin=server.url)
        context.add_init_script(RECORD_NOTIFICATIONS)
        page = context.new_page()
        log_in(page)
        page.goto("/settings/")
        page.get_by_role("switch", name="Browser notifications").check()
        expect(page.get_by_role("status").filter(has_text="Settings saved.")).to_be_visible()
        background = background_tab(context)
        page.goto("/")
        ask_pizza(page)

        notified = poll(
            background, "window.__notifications.length", lambda n: n >= 2, 20, interval_ms=200
        )
        assert notified >= 2, "no reminder within 20 s of asking"
        shown = background.evaluate("window.__notifications.map(n => [n.title, n.body])")
        assert shown == [
            ["Parley is waiting for your answer", "Order a pizza: Pizza"],
            ["A question expires soon", "Order a pizza: Pizza"],
        ]
        # The reminder came before the deadline: the question still waits.
        question = page.get_by_role("group", name="Pizza")
        expect(question.get_by_text("Expired", exact=True)).to_have_count(0)
    finally:
        context.close()


# Makes conversations for a user, each (title, days since its last activity, what was said).
MAKE_CONVERSATIONS = """
from datetime import timedelta
from django.contrib.auth.models import User
from django.utils import timezone
from chat.models import Conversation, Role
from tests.factories import add_message
owner = User.objects.get(username={username!r})
for title, days, said in {made!r}:
    conversation = Conversation.objects.create(owner=owner, title=title)
    for text in said:
        add_message(conversation.pk, text, role=Role.USER)
    Conversation.objects.filter(pk=conversation.pk).update(
        updated_at=timezone.now() - timedelta(days=days)
    )
"""


def make_conversations(server, person, *made):
    server.manage(
        "shell", "-v", "0", "-c", MAKE_CONVERSATIONS.format(username=person[0], made=list(made))
    )


def sidebar_of(page):
    return page.get_by_role("complementary", name="Your conversations")


def group_names(sidebar) -> list[str]:
    return sidebar.get_by_role("heading", level=2).all_inner_texts()


def test_the_sidebar_groups_by_day_and_its_menu_renames_pins_and_deletes_with_undo(
    context, page, parley_server, person
):
    make_conversations(
        parley_server,
        person,
        ("Old notes", 40, []),
        ("Trip ideas", 3, []),
        ("Budget review", 1, []),
        ("Garden plan", 0, []),
    )
    log_in(page, *person)
    sidebar = sidebar_of(page)
    expect(sidebar.get_by_role("heading", level=2)).to_have_text(
        ["Today", "Yesterday", "Previous 7 days", "Older"]
    )
    expect(sidebar.get_by_role("list", name="Yesterday")).to_contain_text("Budget review")

    # The "⋯" menu: a menu button, worked from the keyboard.
    row = sidebar.get_by_role("listitem").filter(has_text="Trip ideas")
    menu_button = row.get_by_role("button", name="Actions for “Trip ideas”")
    expect(menu_button).to_have_attribute("aria-haspopup", "menu")
    expect(menu_button).to_have_attribute("aria-expanded", "false")
    menu_button.focus()
    page.keyboard.press("Enter")
    menu = row.get_by_role("menu", name="Actions for “Trip ideas”")
    expect(menu_button).to_have_attribute("aria-expanded", "true")
    expect(menu.get_by_role("menuitem", name="Rename")).to_be_focused()
    page.keyboard.press("ArrowDown")
    expect(menu.get_by_role("menuitem", name="Pin")).to_be_focused()
    page.keyboard.press("Escape")
    expect(menu).to_be_hidden()
    expect(menu_button).to_be_focused()
    expect(menu_button).to_have_attribute("aria-expanded", "false")

    # Pin: first, under its own heading; its place by date is kept for when it is unpinned.
    page.keyboard.press("ArrowDown")
    page.keyboard.press("ArrowDown")
    expect(menu.get_by_role("menuitem", name="Pin")).to_be_focused()
    page.keyboard.press("Enter")
    expect(sidebar.get_by_role("heading", level=2)).to_have_text(
        ["Pinned", "Today", "Yesterday", "Older"]
    )
    expect(sidebar.get_by_role("list", name="Pinned")).to_contain_text("Trip ideas")

    # Rename in place.
    row = sidebar.get_by_role("listitem").filter(has_text="Budget review")
    row.get_by_role("button", name="Actions for “Budget review”").click()
    row.get_by_role("menuitem", name="Rename").click()
    title = row.get_by_role("textbox", name="Title")
    expect(title).to_be_focused()
    title.fill("Budget for May")
    title.press("Enter")
    # A rename is an activity of today's (as on the list page, where it comes first).
    expect(sidebar.get_by_role("list", name="Today")).to_contain_text("Budget for May")

    # Delete, then Undo: gone from every page meanwhile (another tab loads without it).
    row = sidebar.get_by_role("listitem").filter(has_text="Old notes")
    row.get_by_role("button", name="Actions for “Old notes”").click()
    row.get_by_role("menuitem", name="Delete").click()
    expect(sidebar.get_by_role("link", name="Old notes")).to_have_count(0)
    expect(sidebar.get_by_role("status")).to_contain_text("Conversation deleted.")
    other = context.new_page()
    other.goto("/conversations/")
    expect(other.get_by_role("link", name="Trip ideas")).to_be_visible()
    expect(other.get_by_role("link", name="Old notes")).to_have_count(0)
    undo = sidebar.get_by_role("button", name="Undo")
    expect(undo).to_be_focused()
    undo.click()
    expect(sidebar.get_by_role("list", name="Older")).to_contain_text("Old notes")
    other.reload()
    expect(other.get_by_role("link", name="Old notes")).to_be_visible()

    # Deleted and not undone: gone after a reload too.
    row = sidebar.get_by_role("listitem").filter(has_text="Budget for May")
    row.get_by_role("button", name="Actions for “Budget for May”").click()
    row.get_by_role("menuitem", name="Delete").click()
    expect(sidebar.get_by_role("status")).to_contain_text("Conversation deleted.")
    page.reload()
    expect(sidebar.get_by_role("link", name="Garden plan")).to_be_visible()
    expect(sidebar.get_by_role("link", name="Budget for May")).to_have_count(0)
    expect(sidebar.get_by_role("button", name="Undo")).to_have_count(0)


def test_ctrl_k_searches_and_the_arrow_keys_go_through_the_results_with_their_words(
    page, parley_server, person
):
    make_conversations(
        parley_server,
        person,
        ("Zoo trip", 0, ["Which animals first?", "Tell me about aardvarks and their burrows"]),
        ("Reading list", 0, ["A book on aardvarks, please"]),
        ("Something else", 0, ["Nothing to see"]),
    )
    log_in(page, *person)
    sidebar = sidebar_of(page)
    search = sidebar.get_by_role("searchbox", name="Search")
    page.get_by_role("textbox", name="Message").press("Control+k")
    expect(search).to_be_focused()
    page.keyboard.type("aardvarks")
    results = sidebar.get_by_role("list", name="Search results")
    expect(results.get_by_role("link")).to_have_count(2)
    # Each result shows the words of it that matched.
    zoo = results.get_by_role("link", name=re.compile("^Zoo trip"))
    expect(zoo).to_contain_text("Tell me about aardvarks and their burrows")
    expect(results.get_by_role("link", name=re.compile("^Reading list"))).to_contain_text(
        "A book on aardvarks, please"
    )

    page.keyboard.press("ArrowDown")
    first = results.get_by_role("link").first
    expect(first).to_be_focused()
    page.keyboard.press("ArrowDown")
    expect(results.get_by_role("link").nth(1)).to_be_focused()
    page.keyboard.press("ArrowUp")
    expect(first).to_be_focused()
    page.keyboard.press("ArrowUp")
    expect(search).to_be_focused()
    page.keyboard.press("ArrowDown")
    chosen = first.locator(".sidebar-title").inner_text()
    page.keyboard.press("Enter")
    expect(page.get_by_role("heading", level=1)).to_have_text(chosen)


@pytest.mark.parametrize("theme", ["light", "dark"])
@pytest.mark.parametrize("width", [1280, 390])
def test_the_sidebar_with_its_menu_open_passes_axe(
    open_page, parley_server, person, screenshots, width, theme
):
    make_conversations(
        parley_server,
        person,
        ("Quarterly report draft with a rather long title", 20, []),
        ("Trip ideas", 3, []),
        ("Budget review", 1, []),
        ("Garden plan", 0, []),
    )
    page = open_page(
        parley_server,
        bypass_csp=True,
        color_scheme=theme,
        viewport={"width": width, "height": 800},
    )
    log_in(page, *person)
    if width < 900:
        page.get_by_role("button", name="Conversations").click()
    sidebar = sidebar_of(page)
    row = sidebar.get_by_role("listitem").filter(has_text="Trip ideas")
    row.get_by_role("button", name="Actions for “Trip ideas”").click()
    row.get_by_role("menuitem", name="Pin").click()
    expect(sidebar.get_by_role("heading", level=2)).to_have_text(
        ["Pinned", "Today", "Yesterday", "Older"]
    )
    row = sidebar.get_by_role("listitem").filter(has_text="Budget review")
    row.get_by_role("button", name="Actions for “Budget review”").click()
    expect(row.get_by_role("menu")).to_be_visible()
    assert page.evaluate("document.documentElement.scrollWidth <= window.innerWidth")
    page.screenshot(path=str(screenshots / f"sidebar-menu-{width}-{theme}.png"), caret="initial")
    assert axe_violations(page) == []


def test_a_conversation_made_elsewhere_appears_in_the_sidebar_and_is_marked_when_it_waits(
    open_page, parley_server, person
):
    watching = open_page(parley_server)
    log_in(watching, *person)
    sidebar = sidebar_of(watching)
    elsewhere = open_page(parley_server)
    log_in(elsewhere, *person)
    new_conversation(elsewhere)
    send(elsewhere, "Order a pizza for the team")  # the scripted agent asks which one
    expect(elsewhere.get_by_role("group", name="Pizza")).to_be_visible()

    # No reload: the watching tab's sidebar lists it, marked as waiting for an answer.
    row = sidebar.get_by_role("listitem").filter(has_text="Order a pizza for the team")
    expect(row).to_have_count(1)
    expect(row.get_by_text("Waiting for your answer")).to_be_visible()
