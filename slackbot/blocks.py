"""The Block Kit the bot sends: a question's message (the agent's words before it, the
question, its buttons), the same message once closed, the modal that answers what one click
cannot, and the link's confirmation. Everything from an agent, a tool or a person is shown as
`plain_text` (Slack formats, links and mentions none of it), or escaped where Slack reads
mrkdwn (`escape`); lengths are cut to Block Kit's limits (LIMITS)."""

import json

from django.utils.translation import gettext as _

from questions.models import Question, QuestionKind, QuestionStatus
from questions.payloads import SLACK, form_fields
from questions.selectors import context_line, question_url
from reach.links import choice_options

# Block Kit's documented limits that these messages come near.
LIMITS = {
    "section_text": 3000,
    "button_text": 75,
    "action_id": 255,
    "button_value": 2000,
    "actions_elements": 25,
    "blocks": 50,
    "label": 2000,
    "option_text": 75,
    "option_value": 150,
    "options": 10,
    "modal_title": 24,
    "modal_button": 24,
    "private_metadata": 3000,
    "fallback_text": 4000,
}

# The action_ids of the buttons and the modals' callback_ids (slackbot.interactions).
OPTION = "option"  # f"option:{index}", value f"{question pk}:{index}"
ALLOW, DENY, DENY_WITH_FEEDBACK, OPEN = "allow", "deny", "deny_feedback", "open"
DECLINE = "decline"  # a tool's form, declined
OPEN_IN_PARLEY = "open_in_parley"
CONFIRM_LINK = "confirm_link"
ANSWER_VIEW, DENY_VIEW, FORM_VIEW = "parley_answer", "parley_deny", "parley_form"


def escape(text: str) -> str:
    """`text` for a mrkdwn field: Slack's three control characters escaped, so that nothing
    in it becomes a link, a mention or a channel."""
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def cut(text: str, limit: int) -> str:
    text = text.strip()
    return text if len(text) <= limit else text[: limit - 1].rstrip() + "…"


def plain(text: str, limit: int = LIMITS["section_text"]) -> dict:
    """A plain_text object: shown as it is (no formatting, links, mentions or emoji codes)."""
    return {"type": "plain_text", "text": cut(text, limit) or "-", "emoji": False}


def section(text: str) -> dict:
    return {"type": "section", "text": plain(text)}


def button(text: str, action_id: str, value: str = "", *, style: str = "") -> dict:
    element = {"type": "button", "text": plain(text, LIMITS["button_text"]), "action_id": action_id}
    if value:
        element["value"] = value
    if style:
        element["style"] = style
    return element


def question_message(question: Question) -> dict:
    """chat.postMessage's `text` and `blocks` for a question that waits."""
    words = context_line(question.message) if not question.is_tool_request else ""
    blocks = [
        {"type": "context", "elements": [plain(str(question.conversation), 2000)]},
    ]
    if words:
        blocks.append(section(words))
    blocks += [section(text) for text in asked_texts(question)]
    blocks.append(
        {"type": "actions", "block_id": f"parley:{question.pk}", "elements": buttons(question)}
    )
    return {
        "text": escape(cut(question.summary, LIMITS["fallback_text"])),
        "blocks": blocks[: LIMITS["blocks"]],
    }


def asked_texts(question: Question) -> list[str]:
    """What is asked, one section each: each question's header, text and details; an
    approval's tool and arguments; a tool's request."""
    if question.kind == QuestionKind.TOOL_APPROVAL:
        arguments = json.dumps(question.approval.arguments, ensure_ascii=False, indent=1)
        return [question.summary, arguments]
    if question.kind == QuestionKind.ELICITATION:
        return [question.summary]
    return [
        "\n".join(part for part in (asked.header, asked.text, asked.details) if part)
        for asked in question.request.questions
    ]


def buttons(question: Question) -> list[dict]:
    """A button per option of a one-question choice; Allow and Deny for an approval;
    "Answer…" for what a click cannot answer; and the question in Parley."""
    pk = question.pk
    if question.kind == QuestionKind.TOOL_APPROVAL:
        elements = [
            button(_("Allow"), ALLOW, str(pk), style="primary"),
            button(_("Deny"), DENY, str(pk), style="danger"),
            button(_("Deny with feedback…"), DENY_WITH_FEEDBACK, str(pk)),
        ]
    elif question.kind == QuestionKind.ELICITATION:
        elements = (
            [button(_("Answer…"), OPEN, str(pk)), button(_("Decline"), DECLINE, str(pk))]
            if has_form(question)
            else []
        )
    else:
        options = choice_options(question)
        elements = [
            button(option.label, f"{OPTION}:{index}", f"{pk}:{index}")
            for index, option in enumerate(options)
        ]
        if not options or question.request.questions[0].custom:
            elements.append(button(_("Answer…"), OPEN, str(pk)))
    open_link = button(_("Open in Parley"), OPEN_IN_PARLEY)
    open_link["url"] = question_url(question)
    return [*elements[: LIMITS["actions_elements"] - 1], open_link]


def has_form(question: Question) -> bool:
    """Whether a tool's request is a form the modal can show (not a link to open)."""
    request = question.elicitation
    return request.mode == "form" and bool(form_fields(request.requested_schema, request.order))


def closed_text(question: Question) -> str:
    """What a question's message says once it no longer waits for its recipient."""
    by = question.answered_by.get_username() if question.answered_by_id else ""
    place = _("Slack") if question.answered_via == SLACK else _("Parley")
    names = {"name": by, "place": place}
    status = question.status
    if status == QuestionStatus.PENDING and question.assigned_to_id:
        return _("Assigned to %(name)s in Parley.") % {"name": question.assigned_to.get_username()}
    if status == QuestionStatus.PENDING:
        return _("No longer waits for your answer.")
    if question.kind == QuestionKind.TOOL_APPROVAL and status == QuestionStatus.ANSWERED:
        return _("Allowed by %(name)s in %(place)s.") % names
    if question.kind == QuestionKind.TOOL_APPROVAL and status == QuestionStatus.REJECTED:
        return _("Denied by %(name)s in %(place)s.") % names
    if status in (QuestionStatus.ANSWERED, QuestionStatus.AUTO_RESOLVED):
        return _("Answered by %(name)s in %(place)s.") % names
    if status == QuestionStatus.REJECTED:
        return _("Rejected by %(name)s in %(place)s.") % names
    if status == QuestionStatus.EXPIRED:
        return _("Expired before anyone answered.")
    return _("No longer waits for an answer.")


def closed_message(question: Question) -> dict:
    """chat.update's `text` and `blocks` for a question's message once it no longer waits:
    what was asked, and who answered where; no buttons but the one to Parley."""
    said = closed_text(question)
    open_link = button(_("Open in Parley"), OPEN_IN_PARLEY)
    open_link["url"] = question_url(question)
    blocks = [
        {"type": "context", "elements": [plain(str(question.conversation), 2000)]},
        *[section(text) for text in asked_texts(question)],
        section(said),
        {"type": "actions", "elements": [open_link]},
    ]
    return {"text": escape(said), "blocks": blocks[: LIMITS["blocks"]]}


def link_message(*, username: str, nonce: str) -> dict:
    """The direct message that confirms a link asked for in Settings."""
    text = _(
        "Someone asked, in Parley's Settings, to link this Slack account to the Parley user "
        "%(name)s. If that was you, confirm it."
    ) % {"name": username}
    return {
        "text": escape(text),
        "blocks": [
            section(text),
            {
                "type": "actions",
                "elements": [button(_("Confirm"), CONFIRM_LINK, nonce, style="primary")],
            },
        ],
    }
