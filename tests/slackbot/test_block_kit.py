"""Every kind of message and modal the bot sends keeps within Block Kit's documented limits
(a section's text, a button's, the elements of an actions block, the blocks of a message, an
action_id, a value...), however long what the agent wrote; and the examples in
docs/operators/slack.md are what the code sends."""

import json
import re
from pathlib import Path

import pytest

from questions import resolving
from questions.payloads import Answer
from slackbot import blocks, modals

pytestmark = pytest.mark.django_db

DOCS = Path(__file__).resolve().parents[2] / "docs" / "operators" / "slack.md"


def check_text(text: dict, limit: int, where: str) -> None:
    assert text["type"] in ("plain_text", "mrkdwn"), where
    assert 0 < len(text["text"]) <= limit, where


def check_element(element: dict, where: str) -> None:
    assert len(element.get("action_id", "")) <= 255, where
    if element["type"] == "button":
        check_text(element["text"], 75, where)
        assert len(element.get("value", "")) <= 2000, where
        assert len(element.get("url", "")) <= 3000, where
    options = element.get("options", [])
    assert len(options) <= (100 if element["type"].endswith("select") else 10), where
    for option in options:
        check_text(option["text"], 75, where)
        assert len(option["value"]) <= 150, where
        if "description" in option:
            check_text(option["description"], 75, where)


def check_blocks(found: list[dict]) -> None:
    assert 0 < len(found) <= 50
    block_ids = [b["block_id"] for b in found if "block_id" in b]
    assert len(block_ids) == len(set(block_ids))
    for index, block in enumerate(found):
        where = f"block {index} ({block['type']})"
        assert len(block.get("block_id", "")) <= 255, where
        if block["type"] == "section":
            check_text(block["text"], 3000, where)
        elif block["type"] == "actions":
            assert 0 < len(block["elements"]) <= 25, where
            action_ids = [e.get("action_id") for e in block["elements"]]
            assert len(action_ids) == len(set(action_ids)), where
            for element in block["elements"]:
                check_element(element, where)
        elif block["type"] == "context":
            assert 0 < len(block["elements"]) <= 10, where
            for element in block["elements"]:
                check_text(element, 2000, where)
        elif block["type"] == "input":
            check_text(block["label"], 2000, where)
            if "hint" in block:
                check_text(block["hint"], 2000, where)
            check_element(block["element"], where)
        else:
            pytest.fail(f"{where}: a block type these checks do not know")


def check(sent: dict) -> None:
    """A message (`text` and `blocks`) or a modal view, within Block Kit's limits."""
    if sent.get("type") == "modal":
        check_text(sent["title"], 24, "title")
        for button in ("submit", "close"):
            if button in sent:
                check_text(sent[button], 24, button)
        assert len(sent.get("private_metadata", "")) <= 3000
        assert len(sent.get("callback_id", "")) <= 255
        assert len(sent["blocks"]) <= 100
    else:
        assert 0 < len(sent["text"]) <= 4000
    check_blocks(sent["blocks"])


def documented() -> dict[str, dict]:
    """The JSON examples of the operators' page, by the heading above each."""
    page = DOCS.read_text()
    found = re.findall(r"^### (.+?)\n\n```json\n(.*?)\n```", page, flags=re.S | re.M)
    return {title: json.loads(text) for title, text in found}


def test_the_documented_messages_keep_within_block_kit_s_limits():
    examples = documented()
    assert len(examples) == 7
    for sent in examples.values():
        check(sent)


def normalised(value, replacements: dict[str, str]):
    """`value` with the ids of this test's rows written as the docs write them."""
    if isinstance(value, dict):
        return {k: normalised(v, replacements) for k, v in value.items()}
    if isinstance(value, list):
        return [normalised(v, replacements) for v in value]
    if isinstance(value, str):
        for pattern, replacement in replacements.items():
            value = re.sub(pattern, replacement, value)
    return value


def test_the_documented_messages_are_what_the_code_sends(
    linked, conversation, ask, ask_approval, slack, settings
):
    settings.PUBLIC_URL = "https://parley.example.org"
    question = ask(linked, conversation)
    ids = {
        rf"^{question.pk}(:|$)": r"1\1",
        rf"^parley:{question.pk}$": "parley:1",
        rf'^\{{"q": {question.pk}\}}$': '{"q": 1}',
        rf"/c/{conversation.pk}/": "/c/1/",
    }
    made = {
        "A single choice": blocks.question_message(question),
        'Its modal ("Answer…")': modals.answer_view(question),
        "Confirming a link": blocks.link_message(username="ada", nonce="Zq3…"),
    }
    resolving.answer_question(
        user=linked,
        conversation_id=conversation.pk,
        tool_call_id=question.tool_call_id,
        answers=[Answer(labels=["Pepperoni"])],
        via="slack",
    )
    question.refresh_from_db()
    made["Once answered"] = blocks.closed_message(question)
    examples = documented()
    for title, sent in made.items():
        assert normalised(sent, ids) == examples[title], title


def test_the_documented_form_is_what_the_code_sends(linked, ask_form, slack):
    form = ask_form()
    ids = {rf'^\{{"q": {form.pk}\}}$': '{"q": 1}'}
    assert normalised(modals.answer_view(form), ids) == documented()['A tool\'s form ("Answer…")']
    check(blocks.question_message(form))


def test_the_documented_approval_is_what_the_code_sends(
    linked, conversation, ask_approval, slack, settings
):
    settings.PUBLIC_URL = "https://parley.example.org"
    approval = ask_approval()
    ids = {
        rf"^{approval.pk}$": "1",
        rf"^parley:{approval.pk}$": "parley:1",
        rf'^\{{"q": {approval.pk}\}}$': '{"q": 1}',
        rf"/c/{approval.conversation_id}/": "/c/1/",
    }
    examples = documented()
    assert normalised(blocks.question_message(approval), ids) == examples["An approval"]
    assert normalised(modals.deny_view(approval), ids) == examples["Deny with feedback"]


LONG = "Lorem <@U0BOSS> ipsum *dolor* & sit amet. " * 400


def stored(*, multiple: bool, options: int) -> dict:
    """A stored question longer than the question tools let the model ask."""
    return {
        "header": LONG[:100],
        "question": LONG,
        "details": LONG,
        "options": [
            {"label": f"{n} {LONG[:300]}", "description": LONG[:500]} for n in range(options)
        ],
        "multiSelect": multiple,
    }


def test_long_questions_are_cut_to_the_limits(linked, conversation, ask, slack):
    question = ask(linked, conversation, words=LONG)
    question.questions = [stored(multiple=index % 2 == 0, options=4) for index in range(4)]
    check(blocks.question_message(question))
    check(modals.answer_view(question))
    check(blocks.closed_message(question))


def test_a_choice_of_ten_long_options_keeps_within_the_limits(linked, conversation, ask, slack):
    question = ask(linked, conversation, words=LONG)
    question.questions = [stored(multiple=False, options=10)]
    message = blocks.question_message(question)
    check(message)
    [actions] = [b for b in message["blocks"] if b["type"] == "actions"]
    assert len(actions["elements"]) == 12  # ten options, Answer…, Open in Parley
    check(modals.answer_view(question))


def test_an_approval_with_long_arguments_keeps_within_the_limits(
    linked, conversation, ask_approval, slack, monkeypatch
):
    approval = ask_approval()
    approval.questions[0]["arguments"] = {"text": LONG, "more": [LONG] * 5}
    check(blocks.question_message(approval))
    check(modals.deny_view(approval))
    check(blocks.link_message(username="a" * 150, nonce="n" * 64))
