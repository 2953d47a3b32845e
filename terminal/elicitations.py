"""A running tool asks for values (a form: one prompt per field, by its type) or to open a
link; then Submit, Decline or Cancel. Ctrl+C cancels.
"""

import math

from terminal.api import ACCEPT, CANCEL, DECLINE
from terminal.conversation import Conversation, Next
from terminal.prompts import Parsed, Prompts
from terminal.text import shown, shown_line


def elicit(conversation: Conversation, prompts: Prompts, pending: dict) -> Next:
    """Ask what the tool asks for, and send the answer. Values the server refuses are shown
    and asked again."""
    asked = pending["elicitation"]
    server = shown_line(asked.get("server", ""))
    prompts.say(f"The server {server} asks: {shown(asked.get('message', ''))}")
    path = conversation.path("elicitations", pending["toolCallId"])
    while True:
        try:
            if asked.get("mode") == "url":
                body = ask_url(prompts, asked.get("url", ""))
            else:
                body = ask_form(prompts, asked.get("fields") or [])
        except KeyboardInterrupt:
            prompts.say("Cancelled.")
            body = {"action": CANCEL}
        except EOFError:
            prompts.say("")
            return None
        position = conversation.position()
        response = conversation.post(path, body)
        if body["action"] == ACCEPT and conversation.refused(response, "Try again."):
            continue
        return position if conversation.accepted(response) else None


def ask_url(prompts: Prompts, url: str) -> dict:
    prompts.say(f"  Open this link: {shown_line(url)}")
    choices = [("Done: I opened it", ACCEPT), ("Decline", DECLINE), ("Cancel", CANCEL)]
    return {"action": prompts.choose("Then:", choices)}


def ask_form(prompts: Prompts, fields: list[dict]) -> dict:
    content = {}
    for field in fields:
        value = ask_field(prompts, field)
        if value is not None:
            content[field["name"]] = value
    choices = [("Submit", ACCEPT), ("Decline", DECLINE), ("Cancel", CANCEL)]
    action = prompts.choose("Send it?", choices)
    return {"action": action, "content": content} if action == ACCEPT else {"action": action}


def ask_field(prompts: Prompts, field: dict):
    """One form field's value by its kind (None: left out)."""
    label = shown_line(field.get("title") or field["name"])
    if field.get("description"):
        label += f" ({shown_line(field['description'])})"
    kind = field.get("kind")
    default = field.get("default")
    if kind == "boolean":
        return prompts.yes_no(label, bool(default))
    if kind == "enum":
        choices = [(shown_line(c["title"]), c["value"]) for c in field.get("choices", [])]
        if not field.get("required"):
            choices.append(("(none)", None))
        return prompts.pick(label, choices, default)
    if kind == "array":
        choices = [(shown_line(c["title"]), c["value"]) for c in field.get("choices", [])]
        return prompts.pick_several(
            f"{label}{limits_hint(field)}",
            choices,
            default if isinstance(default, list) else [],
            lambda picked: parse_choices(field, picked),
        )
    shown_default = "" if default is None else str(default)
    return prompts.checked(
        f"{label}{limits_hint(field)}", shown_default, lambda text: parse_field(field, text)
    )


def plain(number) -> str:
    return str(int(number)) if float(number) == int(number) else str(number)


def between(low, high) -> str:
    """Limits as a hint says them: "1-5", "at least 1", "at most 5"; "" when neither is given."""
    if low is not None and high is not None:
        return f"{plain(low)}-{plain(high)}"
    if low is not None:
        return f"at least {plain(low)}"
    return "" if high is None else f"at most {plain(high)}"


def limits_hint(field: dict) -> str:
    """What a number, text or multi-select field takes, shown after its label."""
    kind = field.get("kind")
    parts = []
    if kind == "array":
        count = between(field.get("minItems"), field.get("maxItems"))
        parts += [f"choose {count}"] if count else []
    if kind in ("number", "integer"):
        parts.append("a whole number" if kind == "integer" else "a number")
        parts += filter(None, [between(field.get("minimum"), field.get("maximum"))])
    if not field.get("required"):
        parts.append("optional")
    return f" [{', '.join(parts)}]" if parts else ""


def parse_field(field: dict, text: str) -> Parsed:
    """The value typed, or what is wrong with it; an optional field left empty has no value.
    The server checks again."""
    label = shown_line(field.get("title") or field["name"])
    if not text.strip():
        return Parsed(problem=f"{label} is required." if field.get("required") else None)
    if field.get("kind") in ("number", "integer"):
        return parse_number(field, label, text)
    shortest, longest = field.get("minLength"), field.get("maxLength")
    if shortest is not None and len(text) < shortest:
        return Parsed(problem=f"{label} must be at least {shortest} characters long.")
    if longest is not None and len(text) > longest:
        return Parsed(problem=f"{label} must be at most {longest} characters long.")
    return Parsed(text)


def parse_choices(field: dict, picked: list) -> Parsed:
    """A multi-select's values, or what is wrong with how many; an optional one left empty
    has no value. Each value is one of its choices (the prompt offers no other); the server
    checks again."""
    label = shown_line(field.get("title") or field["name"])
    if not picked:
        return Parsed(problem=f"{label} is required." if field.get("required") else None)
    low, high = field.get("minItems"), field.get("maxItems")
    if low is not None and len(picked) < low:
        return Parsed(problem=f"Choose at least {low} for {label}.")
    if high is not None and len(picked) > high:
        return Parsed(problem=f"Choose at most {high} for {label}.")
    return Parsed(list(picked))


def parse_number(field: dict, label: str, text: str) -> Parsed:
    try:
        number = float(text)
    except ValueError:
        return Parsed(problem=f"{label} must be a number.")
    if not math.isfinite(number):
        return Parsed(problem=f"{label} must be a number.")
    if field.get("kind") == "integer":
        if number != int(number):
            return Parsed(problem=f"{label} must be a whole number.")
        number = int(number)
    low, high = field.get("minimum"), field.get("maximum")
    if low is not None and number < low:
        return Parsed(problem=f"{label} must be at least {plain(low)}.")
    if high is not None and number > high:
        return Parsed(problem=f"{label} must be at most {plain(high)}.")
    return Parsed(number)
