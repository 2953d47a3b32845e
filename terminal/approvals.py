"""A tool call that waits for approval: shown, then allowed (always, or with edited arguments)
or denied (with feedback for the agent), each call of the paused step in turn; Ctrl+C denies
every waiting call and stops the agent.
"""

import json

import httpx

from terminal.api import ALLOW, ALWAYS, DENY, EDIT
from terminal.conversation import Attend, Conversation, Next
from terminal.prompts import Prompts, drop_typed_ahead, select
from terminal.render import approval_lines

DECISIONS = [
    ("Allow", ALLOW),
    ("Always allow (calls like this one, in this conversation)", ALWAYS),
    ("Deny", DENY),
    ("Edit arguments", EDIT),
]


def decide_all(conversation: Conversation, prompts: Prompts, approvals: list[dict]) -> Next:
    """Decide each approval of the paused step in turn; the step goes on after the last."""
    position = conversation.position()
    result = None
    for pending in approvals:
        try:
            result = decide(conversation, prompts, pending) or result
        except KeyboardInterrupt:
            return conversation.reject()
        except EOFError:
            prompts.say("")
            return None
    if result is None:
        return None  # every one was decided elsewhere: back to the prompt
    if result["status"] == "needs_input":
        return Attend(result)  # more waits than was listed
    return position


def decide(conversation: Conversation, prompts: Prompts, pending: dict) -> dict | None:
    """Show one approval and send the user's decision: the agent result, or None when the
    server refused it for good (decided elsewhere)."""
    approval = pending["approval"]
    for line in approval_lines(approval):
        prompts.say(line)
    path = conversation.path("approvals", pending["toolCallId"])
    text = json.dumps(approval.get("arguments", {}), ensure_ascii=False)
    while True:
        decision = choose_decision(prompts)
        if decision == EDIT:
            response, text = allow_edited(conversation, prompts, path, text)
            if response is None:
                continue  # left empty: choose again
        else:
            body: dict = {"decision": decision}
            if decision == DENY:
                feedback = prompts.text("Feedback for the agent (optional):")
                if feedback.strip():
                    body["feedback"] = feedback
            response = conversation.post(path, body)
            if conversation.refused(response, "Try again."):
                continue
        return response.json() if conversation.accepted(response) else None


def choose_decision(prompts: Prompts) -> str:
    """Allow, always, deny or edit: in a terminal with the arrow keys and Enter only, after the
    keys typed ahead are dropped; in a pipe, the word."""
    if prompts.interactive:
        drop_typed_ahead()
        return select("Your decision:", DECISIONS, instruction="(arrow keys, then Enter)")
    words = {v: v for _, v in DECISIONS}
    return prompts.word(
        "Type allow, always, deny or edit: ", words, "Type one of: allow, always, deny, edit."
    )


def allow_edited(
    conversation: Conversation, prompts: Prompts, path: str, text: str
) -> tuple[httpx.Response | None, str]:
    """Allow with arguments the user types (starting from `text`), until the server takes
    them: its response and the text, or None when the user left them empty."""
    while True:
        arguments, text = edit_arguments(prompts, text)
        if arguments is None:
            return None, text
        response = conversation.post(path, {"decision": ALLOW, "arguments": arguments})
        # What does not fit the tool's input schema, in the server's words.
        if not conversation.refused(response, "Edit them again."):
            return response, text


def edit_arguments(prompts: Prompts, text: str) -> tuple[dict | None, str]:
    """Arguments typed as a JSON object (None, when left empty), and the text typed."""
    while True:
        if prompts.interactive:
            typed = prompts.text("Arguments (JSON, empty to go back):", default=text)
        else:
            typed = input("Arguments (JSON, empty to go back): ")
        if not typed.strip():
            return None, text
        text = typed
        try:
            value = json.loads(typed)
        except ValueError as error:
            prompts.say(f"That is not valid JSON: {error}.")
            continue
        if not isinstance(value, dict):
            prompts.say("The arguments must be a JSON object: {...}.")
            continue
        return value, text
