"""Tools from a real MCP server, driven through the browser: the example notes server
(examples/notes_server.py, written with the SDK), run over stdio by Parley itself and over
streamable HTTP as a server of its own, with the scripted agent's demo script ("Save a note":
a read that runs at once, then a write that asks; "Make a note from a form": elicitation)."""

import re

import pytest
from playwright.sync_api import expect

from tests.browser.pages import (
    axe_violations,
    choose_theme,
    log_in,
    new_conversation,
    send,
    transcript_items,
)
from tests.live_server import LiveServer
from tests.notes_server import notes_config, writes


@pytest.fixture(scope="module", params=["stdio", "http"])
def tools_server(request, tmp_path_factory):
    """A Parley server whose MCP_CONFIG names the notes server, over `request.param`."""
    workdir = tmp_path_factory.mktemp(f"tools-{request.param}")
    with notes_config(workdir, request.param) as (config, notes):
        server = LiveServer(workdir, MCP_CONFIG=str(config))
        server.set_up_database()
        server.start()
        server.notes = notes
        yield server
        server.stop()


@pytest.fixture
def tab(request, browser, tools_server, console_errors):
    # axe is injected for its scan: only the keyboard test's context lets it past the CSP.
    bypass = "keyboard" in request.node.name
    context = browser.new_context(base_url=tools_server.url, locale="en-US", bypass_csp=bypass)
    context.set_default_timeout(15_000)
    page = context.new_page()
    page.on("console", lambda m: m.type == "error" and console_errors.append(m.text))
    page.on("pageerror", lambda error: console_errors.append(str(error)))
    log_in(page)
    yield page
    context.close()
    assert console_errors.unexpected() == []


def tool_card(page, title: str):
    """The card of a call of the tool titled `title` (a <details> named by its summary)."""
    return page.locator("details").filter(has_text=f"Used the tool {title}").last


def ask_to_save(page):
    new_conversation(page)
    send(page, "Save a note")
    approval = page.get_by_role("group", name="Write note")
    expect(approval.get_by_role("button", name="Allow", exact=True)).to_be_visible()
    return approval


def test_a_read_runs_at_once_and_a_write_asks_then_runs_once_when_allowed(tab, tools_server):
    before = writes(tools_server.notes)
    approval = ask_to_save(tab)
    # The read ran without asking; the write waits, not run. Each card names the tool by its
    # title, with its server; the write's says what it waits for.
    expect(tab.get_by_text("Used the tool List notes")).to_be_visible()
    write = tool_card(tab, "Write note")
    expect(write.locator("summary")).to_contain_text("notes")
    expect(write.locator("summary")).to_contain_text("Waiting for your approval")
    assert writes(tools_server.notes) == before
    expect(approval.locator("pre")).to_contain_text('"text": "Milk, eggs, bread"')
    expect(approval.get_by_text("notes", exact=True)).to_be_visible()  # the server is named
    # Waiting for the person: the title counts it.
    expect(tab).to_have_title(re.compile(r"^\(1\) "))
    approval.get_by_role("button", name="Allow", exact=True).click()
    expect(
        tab.get_by_text("The notes server answered: Saved shopping (17 characters)")
    ).to_be_visible()
    expect(approval.get_by_text("Allowed", exact=True)).to_be_visible()
    expect(write.locator("summary")).to_contain_text("Done")
    expect(approval.get_by_text(re.compile("Answered by demo .* via browser"))).to_be_visible()
    assert writes(tools_server.notes) == [*before, "write shopping"]
    assert (tools_server.notes / "shopping.md").read_text() == "Milk, eggs, bread"
    expect(tab).not_to_have_title(re.compile(r"^\("))


def test_deny_with_feedback_reaches_the_model_and_nothing_runs(tab, tools_server):
    before = writes(tools_server.notes)
    approval = ask_to_save(tab)
    approval.get_by_role("textbox", name="Feedback").fill("Call it groceries instead")
    approval.get_by_role("button", name="Deny").click()
    expect(
        tab.get_by_text(
            "The note was not saved: The user denied this call: the tool did not run. "
            "Their feedback: Call it groceries instead"
        )
    ).to_be_visible()
    expect(approval.get_by_text("Denied", exact=True)).to_be_visible()
    # The call's card says it was denied, not that it failed, also after a reload.
    for _ in range(2):
        summary = tool_card(tab, "Write note").locator("summary")
        expect(summary).to_contain_text("Denied")
        expect(summary).not_to_contain_text("Failed")
        tab.reload()
    assert writes(tools_server.notes) == before


def test_edit_arguments_refuses_a_bad_edit_and_runs_the_edited_call(
    tab, tools_server, console_errors
):
    console_errors.expect("status of 422")  # the refused edits
    approval = ask_to_save(tab)
    approval.get_by_role("button", name="Edit arguments").click()
    arguments = approval.get_by_role("textbox", name="Arguments")
    expect(arguments).to_be_focused()
    arguments.fill('{"name": "groceries"}')
    approval.get_by_role("button", name="Allow", exact=True).click()
    expect(approval.get_by_role("alert")).to_have_text(
        "The arguments do not fit the tool's input schema: 'text' is a required property"
    )
    arguments.fill('{"name": "groceries", "text": not json}')
    approval.get_by_role("button", name="Allow", exact=True).click()
    expect(approval.get_by_role("alert")).to_contain_text("The arguments are not valid JSON")
    assert not (tools_server.notes / "groceries.md").exists()
    arguments.fill('{"name": "groceries", "text": "Apples"}')
    approval.get_by_role("button", name="Allow", exact=True).click()
    expect(approval.get_by_text("Allowed with edited arguments")).to_be_visible()
    # The model reads that the person edited the call, and with what.
    expect(transcript_items(tab).last).to_contain_text(
        "The user edited the arguments before allowing this call"
    )
    expect(transcript_items(tab).last).to_contain_text("Saved groceries (6 characters)")
    assert (tools_server.notes / "groceries.md").read_text() == "Apples"


def test_always_allow_keeps_a_rule_for_this_conversation_until_revoked(tab, tools_server):
    approval = ask_to_save(tab)
    conversation = tab.url
    approval.get_by_role("button", name="Always allow").click()
    expect(approval.get_by_text("Always allowed", exact=True)).to_be_visible()
    expect(tab.get_by_text("The notes server answered: Saved shopping")).to_be_visible()

    before = writes(tools_server.notes)
    send(tab, "Save a note")
    expect(tab.get_by_text("The notes server answered: Saved shopping")).to_have_count(2)
    expect(tab.get_by_role("button", name="Allow", exact=True)).to_have_count(0)
    assert writes(tools_server.notes) == [*before, "write shopping"]

    tab.goto("/settings/tools/")
    expect(tab.get_by_role("row", name=re.compile("Write note"))).to_contain_text("Asks you first")
    expect(tab.get_by_role("row", name=re.compile("List notes"))).to_contain_text("Runs at once")
    expect(tab.get_by_text("Connected")).to_be_visible()
    rules = tab.get_by_role("table", name="Your rules")
    rules.get_by_role("button", name=re.compile(r"Revoke rule \d+ on write_note")).click()
    expect(tab.get_by_text("Rule revoked.")).to_be_visible()

    tab.goto(conversation)
    send(tab, "Save a note")
    approval = tab.get_by_role("group", name="Write note").last  # asks again
    expect(approval.get_by_role("button", name="Allow", exact=True)).to_be_visible()
    approval.get_by_role("button", name="Deny").click()  # and leaves nothing waiting
    expect(approval.get_by_text("Denied", exact=True)).to_be_visible()


def test_elicitation_round_trips_accept_decline_and_cancel(tab, tools_server):
    new_conversation(tab)
    send(tab, "Make a note from a form")
    form = tab.get_by_role("group", name="Details for the new note")
    form.get_by_role("textbox", name="Note name").fill("from-form")
    form.get_by_role("textbox", name="Text").fill("Filled in by hand")
    form.get_by_role("spinbutton", name="Priority").fill("9")
    form.get_by_role("checkbox", name="Pinned").check()
    form.get_by_role("radio", name="green").check()
    form.get_by_role("button", name="Submit").click()
    # The schema's limit is the field's own: the page stops the Submit and says so.
    priority = form.get_by_role("spinbutton", name="Priority")
    assert priority.evaluate("input => input.validationMessage")
    expect(form.get_by_role("button", name="Submit")).to_be_visible()
    priority.fill("4")
    form.get_by_role("button", name="Submit").click()
    expect(
        tab.get_by_text("The notes server answered: Saved from-form from the form")
    ).to_be_visible()
    expect(form.get_by_text("Sent", exact=True)).to_be_visible()
    assert (tools_server.notes / "from-form.md").read_text() == "Filled in by hand"

    for button, words in (("Decline", "declined"), ("Cancel", "cancelled")):
        new_conversation(tab)
        send(tab, "Make a note from a form")
        form = tab.get_by_role("group", name="Details for the new note")
        form.get_by_role("button", name=button).click()
        expect(tab.get_by_text(f"The notes server answered: The user {words}")).to_be_visible()


def test_a_forms_several_choices_are_checkboxes_and_the_server_receives_a_list(
    tab, tools_server, console_errors
):
    console_errors.expect("status of 422")  # the refusal of three tags, on purpose
    new_conversation(tab)
    send(tab, "Make a note from a form")
    form = tab.get_by_role("group", name="Details for the new note")
    # Offered in the inbox too: the same group of boxes, named by the field's title.
    tab.goto("/questions/")
    inbox = tab.get_by_role("list", name="Pending questions")
    tags = inbox.get_by_role("group", name="Details for the new note").get_by_role(
        "group", name="Tags"
    )
    for name in ("work", "home", "urgent"):
        expect(tags.get_by_role("checkbox", name=name)).not_to_be_checked()
    expect(tags).to_have_accessible_description("Choose at most 2.")
    tab.go_back()

    form.get_by_role("textbox", name="Note name").fill("tagged")
    form.get_by_role("textbox", name="Text").fill("Sorted")
    form.get_by_role("radio", name="blue").check()
    tags = form.get_by_role("group", name="Tags")
    # By keyboard: Tab reaches the boxes, Space ticks the one in focus.
    tags.get_by_role("checkbox", name="work").focus()
    tab.keyboard.press("Space")
    expect(tags.get_by_role("checkbox", name="work")).to_be_checked()
    tab.keyboard.press("Tab")
    expect(tags.get_by_role("checkbox", name="home")).to_be_focused()
    tab.keyboard.press("Space")
    tags.get_by_role("checkbox", name="urgent").check()
    form.get_by_role("button", name="Submit").click()
    # Three of at most two: the server refuses, naming the field, and nothing is sent.
    expect(form.get_by_role("alert")).to_have_text("Tags takes at most 2 choices.")
    tags.get_by_role("checkbox", name="home").uncheck()
    form.get_by_role("button", name="Submit").click()
    expect(
        tab.get_by_text(
            "The notes server answered: Saved tagged from the form, tagged work, urgent"
        )
    ).to_be_visible()
    expect(form.get_by_text("Sent", exact=True)).to_be_visible()
    expect(form.get_by_role("definition").filter(has_text="work, urgent")).to_be_visible()


def test_the_approval_is_keyboard_only_and_number_keys_never_allow(tab, tools_server, screenshots):
    before = writes(tools_server.notes)
    approval = ask_to_save(tab)
    allow = approval.get_by_role("button", name="Allow", exact=True)
    # The person was not typing: focus moved to the approval, on Deny (a write: an Enter
    # meant for something else never allows it).
    expect(approval.get_by_role("button", name="Deny")).to_be_focused()
    for key in ("1", "2", "3"):
        tab.keyboard.press(key)
    tab.keyboard.press("ArrowLeft")
    expect(approval.get_by_role("button", name="Always allow")).to_be_focused()
    tab.keyboard.press("ArrowLeft")
    expect(allow).to_be_focused()
    assert writes(tools_server.notes) == before
    expect(allow).to_be_visible()
    assert axe_violations(tab) == []
    tab.screenshot(path=screenshots / f"approval-{tools_server.notes.parent.name}.png")
    tab.keyboard.press("Enter")
    expect(approval.get_by_text("Allowed", exact=True)).to_be_visible()
    expect(tab.get_by_text("The notes server answered: Saved shopping")).to_be_visible()
    assert writes(tools_server.notes) == [*before, "write shopping"]


def test_an_approval_from_the_inbox_and_the_blocks_in_both_themes_and_widths(
    browser, tools_server, screenshots
):
    if tools_server.notes.parent.name.startswith("tools-http"):
        pytest.skip("the pictures are the same over HTTP")
    context = browser.new_context(
        base_url=tools_server.url,
        locale="en-US",
        bypass_csp=True,
        viewport={"width": 1280, "height": 900},
    )
    context.set_default_timeout(15_000)
    page = context.new_page()
    log_in(page)
    approval = ask_to_save(page)
    new_conversation(page)
    send(page, "Make a note from a form")
    form = page.get_by_role("group", name="Details for the new note")
    expect(form.get_by_role("textbox", name="Note name")).to_be_visible()

    page.goto("/questions/")
    inbox = page.get_by_role("list", name="Pending questions")
    expect(inbox.get_by_role("listitem")).to_have_count(2)
    approval = inbox.get_by_role("group", name="Write note")
    form = inbox.get_by_role("group", name="Details for the new note")
    for theme in ("Light", "Dark"):
        choose_theme(page, theme)
        for width, suffix in ((1280, ""), (390, "-phone")):
            # Tall enough that no block scrolls under the sticky header in its picture.
            page.set_viewport_size({"width": width, "height": 2000})
            assert axe_violations(page) == [], f"{theme} at {width}"
            dark = "-dark" if theme == "Dark" else ""
            approval.screenshot(path=screenshots / f"approval-pending{dark}{suffix}.png")
            form.screenshot(path=screenshots / f"tool-form-pending{dark}{suffix}.png")
            # Nothing scrolls sideways at a phone's width.
            assert page.evaluate("document.documentElement.scrollWidth") <= width
    page.set_viewport_size({"width": 1280, "height": 900})
    choose_theme(page, "System")

    approval.get_by_role("button", name="Allow", exact=True).click()
    expect(approval).to_have_count(0)  # decided from the inbox: it leaves the list
    expect(inbox.get_by_role("listitem")).to_have_count(1)
    form.get_by_role("button", name="Cancel").click()
    expect(page.get_by_text("No questions are waiting for you.")).to_be_visible()
    context.close()


def test_a_form_focuses_its_first_field_in_view_and_says_its_limits_before_a_submit(
    browser, tools_server, screenshots
):
    if tools_server.notes.parent.name.startswith("tools-http"):
        pytest.skip("the form is the same over HTTP")
    for theme in ("Light", "Dark"):
        for width in (1280, 390):
            # Short enough that the form does not fit: the page scrolls to the focused field.
            context = browser.new_context(
                base_url=tools_server.url,
                locale="en-US",
                viewport={"width": width, "height": 640},
                color_scheme=theme.lower(),
            )
            context.set_default_timeout(15_000)
            page = context.new_page()
            log_in(page)
            new_conversation(page)
            send(page, "Make a note from a form")
            form = page.get_by_role("group", name="Details for the new note")
            name = form.get_by_role("textbox", name="Note name")
            # The first field in the server's order, not the first checkbox or radio.
            expect(name).to_be_focused()
            # In view, and below the sticky header (on a phone the header scrolls away).
            box = name.bounding_box()
            header = page.get_by_role("banner").bounding_box()
            assert box["y"] >= max(0, header["y"] + header["height"]), (box, header)
            assert box["y"] + box["height"] <= 640, box
            # What each field takes is said before any submit, and read with the field.
            expect(form.get_by_text("At most 60 characters.")).to_be_visible()
            expect(form.get_by_text("A whole number. From 1 to 5.")).to_be_visible()
            expect(name).to_have_accessible_description(re.compile("At most 60 characters"))
            priority = form.get_by_role("spinbutton", name="Priority")
            expect(priority).to_have_accessible_description("A whole number. From 1 to 5.")
            # Text has no length limit: prose, in a textarea where Enter starts a new line.
            text = form.get_by_role("textbox", name="Text")
            assert text.evaluate("box => box.tagName") == "TEXTAREA"
            text.fill("First line")
            text.press("Enter")
            text.press_sequentially("second line")
            expect(text).to_have_value("First line\nsecond line")
            expect(form.get_by_role("button", name="Submit")).to_be_visible()
            name.focus()
            suffix = f"{'-dark' if theme == 'Dark' else ''}-{width}"
            page.screenshot(path=screenshots / f"tool-form-first-field{suffix}.png")
            # Nothing left waiting for the module's later tests (the inbox counts them).
            form.get_by_role("button", name="Decline").click()
            expect(form.get_by_text("Declined", exact=True)).to_be_visible()
            context.close()
