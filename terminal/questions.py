"""A question the agent asks: asked in a terminal (one choice, several, a confirmation, a typed
answer) or numbered in a pipe, then answered; Ctrl+C rejects it and stops the agent.
"""

import questionary

from terminal.conversation import Conversation, Next
from terminal.prompts import Parsed, Prompts, checkbox_by_number, select_by_number
from terminal.render import option_title, question_title

OTHER = "\x00other"
YES, NO = "Yes", "No"


def answer(conversation: Conversation, prompts: Prompts, pending: dict) -> Next:
    """Ask the paused turn's questions and send the answers. An answer the server refuses
    (422) is shown and asked again; one answered elsewhere goes back to the prompt."""
    while True:
        try:
            answers = {q["question"]: ask(prompts, q) for q in pending["questions"]}
        except KeyboardInterrupt:
            return conversation.reject()
        except EOFError:
            prompts.say("")
            return None
        position = conversation.position()
        body = {"answers": answers, "toolCallId": pending["toolCallId"]}
        response = conversation.post(conversation.path("respond"), body)
        if conversation.refused(response, "Try again.", statuses=(422,)):
            continue  # the same question, asked again
        return position if conversation.accepted(response) else None


def ask(prompts: Prompts, question: dict):
    """The answer to one question: a label, labels (several choices) or typed text."""
    title = question_title(question)
    labels = [o["label"] for o in question["options"]]
    if prompts.interactive:
        return ask_in_terminal(title, question, labels)
    return ask_numbered(prompts, title, question, labels)


def is_confirmation(question: dict, labels: list[str]) -> bool:
    return labels == [YES, NO] and not question["custom"]


def typed_answer() -> str:
    return questionary.text("Your answer:", validate=bool).unsafe_ask()


def ask_in_terminal(title: str, question: dict, labels: list[str]):
    if is_confirmation(question, labels):
        yes = questionary.confirm(title, default=question.get("default") != NO).unsafe_ask()
        return YES if yes else NO
    if not labels:
        return questionary.text(title, validate=bool).unsafe_ask()
    choices = [(option_title(o), o["label"]) for o in question["options"]]
    if question["custom"]:
        choices.append(("Other…", OTHER))
    if not question["multiSelect"]:
        chosen = select_by_number(title, choices)
        return typed_answer() if chosen == OTHER else chosen
    chosen = checkbox_by_number(
        title, choices, validate=lambda picked: bool(picked) or "Pick at least one."
    )
    if OTHER in chosen:
        chosen = [c for c in chosen if c != OTHER]
        chosen.append(typed_answer())
    return chosen


def ask_numbered(prompts: Prompts, title: str, question: dict, labels: list[str]):
    """Numbered choices; a reply that does not fit is explained and asked again."""
    prompts.say(title)
    for number, option in enumerate(question["options"], 1):
        prompts.say(f"  {number}) {option_title(option)}")
    confirmation = is_confirmation(question, labels)
    hint = numbered_hint(question, labels, confirmation)
    return prompts.until_it_fits(
        lambda: input(hint).strip(),
        lambda reply: parse_numbered(reply, question, labels, confirmation),
    )


def numbered_hint(question: dict, labels: list[str], confirmation: bool) -> str:
    """What the numbered prompt takes."""
    if not labels:
        return "Your answer: "
    if confirmation:
        return "1 or y (Yes), 2 or n (No): "
    typed = " (or type an answer)" if question["custom"] else ""
    if question["multiSelect"]:
        return f"Numbers 1-{len(labels)}, comma-separated{typed}: "
    return f"Number 1-{len(labels)}{typed}: "


def parse_numbered(reply: str, question: dict, labels: list[str], confirmation: bool) -> Parsed:
    if not reply:
        return Parsed(problem="Type an answer." if not labels else "Choose an option.")
    if not labels:
        return Parsed(reply)
    if confirmation and reply.lower() in ("y", "yes", "n", "no"):
        return Parsed(YES if reply.lower().startswith("y") else NO)
    parts = [p.strip() for p in reply.split(",")] if question["multiSelect"] else [reply]
    picked = []
    for part in filter(None, parts):
        if part.isdecimal() and part.isascii():
            if not 1 <= int(part) <= len(labels):
                return Parsed(problem=f"There is no option {part}: choose 1-{len(labels)}.")
            picked.append(labels[int(part) - 1])
        elif question["custom"]:
            picked.append(part)
        else:
            return Parsed(problem=f"Choose by number, 1-{len(labels)}.")
    if not picked:
        return Parsed(problem="Choose an option.")
    if question["multiSelect"]:
        return Parsed(picked)
    if len(picked) > 1:
        return Parsed(problem="Choose one option.")
    return Parsed(picked[0])
