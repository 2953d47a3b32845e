"""The terminal client with tools from an MCP server (the example notes server over stdio, as
`make run` connects it): an approval decided with the arrow keys (a number key never allows),
edited arguments the server refuses and then takes, a form a running tool asks for, and the
same without a terminal (deny with feedback, always allow)."""

import httpx
import pexpect
import pytest

from tests.api.test_live import run_chat, spawn_chat
from tests.live_server import LiveServer
from tests.notes_server import notes_config, writes

pytestmark = pytest.mark.live

DOWN = "\x1b[B"
CLEAR_LINE = "\x15"  # Ctrl+U: the default text goes


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    """A server whose agent has the notes server's tools; and the notes directory."""
    workdir = tmp_path_factory.mktemp("mcp-terminal")
    with notes_config(workdir, "stdio") as (config, notes):
        server = LiveServer(workdir, SCRIPTED_AGENT_DELAY="0.01", MCP_CONFIG=str(config))
        server.set_up_database()
        server.start()
        try:
            yield server, notes
        finally:
            server.stop()


@pytest.fixture(scope="module")
def server(served):
    return served[0]


@pytest.fixture(scope="module")
def notes(served):
    return served[1]


def token_for(server, username: str) -> str:
    """A token of a user of its own: "Always allow" is remembered per user."""
    server.manage(
        "shell",
        "-c",
        "from django.contrib.auth.models import User; "
        f"User.objects.create_user({username!r}, password='pw-{username}-12345')",
    )
    return server.manage("create_api_token", username).strip()


@pytest.fixture(scope="module")
def token(server):
    return token_for(server, "ada")


def api(server, token) -> httpx.Client:
    return httpx.Client(
        base_url=f"{server.url}/api/v1", headers={"Authorization": f"Bearer {token}"}, timeout=30
    )


def test_an_approval_with_edited_arguments_through_the_terminal(server, token, notes):
    child = spawn_chat(server, token, "--new")
    try:
        child.expect("> ")
        child.sendline("save a note")
        child.expect("Allow Write note from the server notes?")
        child.expect('"text": "Milk, eggs, bread"')  # the arguments, spread out
        child.expect("Your decision")
        child.send("1y")  # no key alone decides: the choice needs Enter
        # Keys are read in order: once the arrow key after them moves the choice, those two
        # were read, and the menu is still asking.
        child.send(DOWN)
        child.expect("» Always allow")
        with api(server, token) as http:
            [pending] = http.get("/questions").json()
        assert (pending["tool"], pending["questionResolution"]) == ("tool_approval", "asked")
        child.send(DOWN * 2 + "\r")  # Edit arguments
        child.expect("Arguments")
        child.send(CLEAR_LINE + '{"name": "shopping"}\r')
        # The server's word on what does not fit the tool's input schema, and again.
        child.expect("'text' is a required property")
        child.expect("Arguments")
        child.send(CLEAR_LINE + '{"name": "shopping", "text": "Coffee"}\r')
        child.expect(r"Saved shopping \(6 characters\)")
        child.expect("> ")
        child.sendeof()
        child.expect(pexpect.EOF)
    finally:
        child.close(force=True)
    assert (notes / "shopping.md").read_text() == "Coffee"
    with api(server, token) as http:
        answered = http.get("/questions", params={"status": "answered"}).json()
    [decided] = [q for q in answered if q["tool"] == "tool_approval"]
    assert decided["decision"] == "allow"
    assert decided["editedArguments"] == {"name": "shopping", "text": "Coffee"}
    assert (decided["answeredBy"], decided["answeredVia"]) == ("ada", "terminal")


def test_a_form_a_running_tool_asks_for_through_the_terminal(server, token, notes):
    child = spawn_chat(server, token, "--new")
    try:
        child.expect("> ")
        child.sendline("make a note from a form")  # its tool runs without approval first
        child.expect("The server notes asks: Details for the new note")
        child.expect("Note name")
        child.send("groceries\r")
        child.expect("Text")
        child.send("Tea and milk\r")
        child.expect("Pinned")
        child.send("y\r")
        child.expect(r"Priority \[a whole number, 1-5, optional\]")
        child.send(CLEAR_LINE + "9\r")
        child.expect("Priority must be at most 5.")  # asked again, not sent
        child.send(CLEAR_LINE + "4\r")
        child.expect("Colour")
        child.send(DOWN + "\r")  # green
        child.expect(r"Tags \[choose at most 2, optional\]")
        # Number keys tick. Three is one too many: that Enter sends nothing (the checkbox's
        # validation keeps it open), and the answer below has the two left ticked.
        child.send("123\r")
        child.send("2\r")  # home unticked
        child.expect("Send it?")
        child.send("\r")  # Submit
        child.expect(
            "The notes server answered: Saved groceries from the form, tagged work, urgent"
        )
        child.expect("> ")
        child.sendeof()
        child.expect(pexpect.EOF)
    finally:
        child.close(force=True)
    assert (notes / "groceries.md").read_text() == "Tea and milk"
    with api(server, token) as http:
        answered = http.get("/questions", params={"status": "answered"}).json()
    [form] = [q for q in answered if q["tool"] == "elicitation"]
    assert form["content"] == {
        "name": "groceries",
        "text": "Tea and milk",
        "pinned": True,
        "priority": 4,
        "colour": "green",
        "tags": ["work", "urgent"],
    }
    assert form["answeredVia"] == "terminal"


def test_without_a_terminal_a_forms_several_choices_are_numbers_comma_separated(server, notes):
    token = token_for(server, "cy")
    # Name, text, pinned, priority (its default), colour 3, then tags: a number too high and
    # three of two are asked again.
    typed = "make a note from a form\nlists\nTo do\nn\n\n3\n4\n1,2,3\n3, 2\nsubmit\n"
    output = run_chat(server, token, "--new", typed=typed).stdout
    assert "Tags [choose at most 2, optional]" in output
    assert "Choose by number, 1-3." in output
    assert "Choose at most 2 for Tags." in output
    assert "The notes server answered: Saved lists from the form, tagged urgent, home" in output
    assert (notes / "lists.md").read_text() == "To do"


def test_without_a_terminal_deny_with_feedback_then_always_allow(server, notes):
    token = token_for(server, "ben")
    before = writes(notes)
    typed = "save a note\n1\nyes\ndeny\nNot now, thanks.\n"
    output = run_chat(server, token, "--new", typed=typed).stdout
    assert output.count("Type one of: allow, always, deny, edit.") == 2  # "1" and "yes"
    assert "The note was not saved: The user denied this call" in output
    assert "Their feedback: Not now, thanks." in output
    assert writes(notes) == before  # nothing was written

    typed = "save a note\nalways\nsave a note\n"
    output = run_chat(server, token, "--new", typed=typed).stdout
    assert output.count("Allow Write note from the server notes?") == 1  # then never again
    assert output.count("The notes server answered: Saved shopping") == 2
    with api(server, token) as http:
        decided = http.get("/questions", params={"status": "answered"}).json()
    # The second call was the kept rule's to allow: audited as the rule's decision.
    assert sorted((q["decision"], q["answeredVia"]) for q in decided) == [
        ("allow", "rule"),
        ("always", "terminal"),
    ]
