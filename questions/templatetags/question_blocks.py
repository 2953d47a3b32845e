import json
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from django import template
from django.contrib.humanize.templatetags.humanize import naturaltime
from django.utils.dateparse import parse_datetime
from django.utils.html import format_html
from django.utils.safestring import SafeString
from django.utils.translation import gettext_lazy as _

from core.text import drop_invisible
from questions.links import safe_link
from questions.models import AnsweredVia
from questions.payloads import (
    Answer,
    ApprovalPayload,
    ElicitationPayload,
    QuestionPayload,
    payload_of,
)
from questions.schemas import AskedQuestion
from questions.selectors import CardState, assignees, card_state

register = template.Library()

# The admin's label for each questionResolution; one this version does not know shows as is.
RESOLUTION_LABELS = {
    "asked": _("Pending"),
    "replied": _("Answered"),
    "rejected": _("Rejected"),
    "expired": _("Expired"),
    "cancelled": _("Cancelled"),
}


@register.filter
def question_payload(block) -> QuestionPayload | None:
    """The typed payload of a question block (None if it cannot be read)."""
    return payload_of(block)


@register.simple_tag
def question_state(conversation, payload: QuestionPayload) -> CardState:
    """What a pending question's card shows besides its block, read from its row as the card
    is rendered (whom it waits for, its draft); the page has checked access to
    `conversation`."""
    return card_state(conversation.pk, payload.tool_call_id)


@register.filter
def deadline_when(expires_at: datetime) -> SafeString:
    """How far off a deadline is ("10 minutes from now"), in an element static/parley-ui.js
    counts down from its `data-deadline`."""
    return format_html(
        '<span class="deadline-when" data-deadline="{}">{}</span>',
        expires_at.isoformat(),
        naturaltime(expires_at),
    )


@register.filter
def draft_json(state: CardState) -> str:
    """A card's saved draft as JSON ("" if none), for static/parley-drafts.js to restore."""
    answers = state.draft
    return json.dumps([a.model_dump() for a in answers], ensure_ascii=False) if answers else ""


@register.simple_tag
def question_assignees(conversation) -> list:
    """Whom a pending question of a shared conversation may be assigned to (its owner and
    participants); none for a conversation nobody else is in. The page has checked access."""
    shared = getattr(conversation, "shared", None)
    if shared is None:  # read without its role (the inbox)
        shared = conversation.memberships.exists()
    return assignees(conversation) if shared else []


@dataclass(frozen=True)
class QuestionCard:
    """A question block as the operators' transcript shows it, read leniently: fields this
    version does not know (such as the audit of who answered) are read from the stored JSON."""

    resolution: str
    answered: list[tuple[AskedQuestion, Answer | None]]
    answer_text: str
    answered_by: str
    answered_at: datetime | str
    answered_via: str

    @property
    def status_label(self) -> str:
        return RESOLUTION_LABELS.get(self.resolution, self.resolution)

    @property
    def resolved(self) -> bool:
        return self.resolution != "asked"


@register.filter
def question_card(block) -> QuestionCard | None:
    extra: dict[str, Any] = getattr(block, "extra", None) or {}
    payload = payload_of(block) or _lenient_payload(extra)
    if payload is None:
        return None
    resolution = extra.get("questionResolution")
    return QuestionCard(
        resolution=resolution if isinstance(resolution, str) else payload.question_resolution,
        answered=payload.answered,
        answer_text=payload.answer_text or "",
        answered_by=str(extra.get("answeredBy") or ""),
        answered_at=_time(extra.get("answeredAt")),
        answered_via=str(extra.get("answeredVia") or ""),
    )


def _time(value: Any) -> datetime | str:
    """A stored ISO time as a datetime (shown in the operator's time zone), else as stored."""
    if not isinstance(value, str):
        return ""
    try:
        return parse_datetime(value) or value
    except ValueError:
        return value


def _lenient_payload(extra: dict[str, Any]) -> QuestionPayload | None:
    """What was asked and answered, from a block with fields or a resolution this version
    does not know."""
    known = {field.alias or name for name, field in QuestionPayload.model_fields.items()}
    data = {key: value for key, value in extra.items() if key in known}
    # Shown from the stored JSON as they are (QuestionCard), so an odd value costs nothing.
    for key in ("questionResolution", "answeredBy", "answeredAt", "answeredVia", "expiresAt"):
        data.pop(key, None)
    try:
        return QuestionPayload.model_validate(data)
    except ValueError:
        return None


# How a question was resolved (answeredVia), as the audit line names it.
VIA_LABELS = dict(AnsweredVia.choices)


@register.filter
def via_label(via: str | None) -> str:
    return VIA_LABELS.get(via or "", via or "")


@register.filter
def approval_payload(block) -> ApprovalPayload | None:
    """The payload of an approval block (None if it cannot be read)."""
    try:
        return ApprovalPayload.model_validate(block.extra)
    except (AttributeError, ValueError):
        return None


@dataclass(frozen=True)
class Batch:
    """A step's approvals still waiting, decided together from the card under the last of
    them: each call's id with the digest of the arguments shown (what "Allow all" binds to)."""

    calls: list[tuple[str, str]]
    # False when one of them needs several people's Allow (each is allowed on its own then).
    allow_all: bool = True

    @property
    def count(self) -> int:
        return len(self.calls)

    @property
    def key(self) -> str:
        return self.calls[-1][0]


@register.simple_tag
def approval_batch(blocks, block) -> Batch | None:
    """The batch `block` closes: when two or more approvals of its message (`blocks`, the
    blocks shown) wait, the last of them shows "Allow all" and "Deny all" (no query: the
    blocks say it all). None elsewhere, and in the inbox, which shows approvals one by one."""
    waiting = []
    for shown in blocks or ():
        if getattr(shown, "action_type", None) == block.action_type:
            payload = approval_payload(shown)
            # A sub-agent's approval is decided on its own: it is not of the parent's step.
            if payload is not None and payload.pending and payload.subagent_number is None:
                waiting.append(payload)
    if len(waiting) < 2 or waiting[-1].tool_call_id != block.extra.get("toolCallId"):
        return None
    return Batch(
        calls=[(p.tool_call_id, p.arguments_digest) for p in waiting],
        allow_all=all(p.needed == 1 for p in waiting),
    )


@register.filter
def elicitation_payload(block) -> ElicitationPayload | None:
    """The payload of an elicitation block (None if it cannot be read)."""
    try:
        return ElicitationPayload.model_validate(block.extra)
    except (AttributeError, ValueError):
        return None


@register.simple_tag
def elicitation_value(payload: ElicitationPayload, field) -> str:
    """A sent value as the person would read it: a choice by its title (several, by their
    titles, comma-separated), a switch as Yes/No."""
    value = (payload.content or {}).get(field.name)
    if field.kind == "boolean":
        return _("Yes") if value else _("No")
    titles = {c.value: c.title for c in field.choices}
    if field.kind == "enum":
        return titles.get(value, str(value))
    if field.kind == "array" and isinstance(value, list):
        return ", ".join(titles.get(v, str(v)) for v in value)
    return "" if value is None else str(value)


# --- An agent CLI's call, as what it is ---------------------------------------------------------

# Longer content is folded (a <details> the person opens).
FOLD_LINES = 12
FOLD_CHARS = 1_500


@dataclass(frozen=True)
class CliCall:
    """What an agent CLI's call (Claude Code's, Codex's) reads as on its approval card: `kind`
    command, write, edit, fetch or arguments; every text cleaned of invisible characters (the
    template escapes it)."""

    kind: str
    command: str = ""
    description: str = ""
    path: str = ""
    content: str = ""
    old: str = ""
    new: str = ""
    url: str = ""
    host: str = ""
    folded: bool = False


def _text(value: Any) -> str:
    return drop_invisible(value) if isinstance(value, str) else ""


def _long(*texts: str) -> bool:
    return any(t.count("\n") >= FOLD_LINES or len(t) > FOLD_CHARS for t in texts)


@register.filter
def cli_call(payload: ApprovalPayload) -> CliCall | None:
    """An agent CLI's tool call, as the tool it is (None for an MCP tool's call, shown as its
    arguments). A CLI's call is named by the tool's own name; an MCP tool's is mcp__…__…."""
    if payload.name != payload.tool:
        return None
    args = payload.arguments
    tool = payload.tool
    if tool == "Bash" and isinstance(args.get("command"), str):
        command = _text(args["command"])
        return CliCall(
            kind="command",
            command=command,
            description=_text(args.get("description")),
            folded=_long(command),
        )
    if tool == "Write" and isinstance(args.get("file_path"), str):
        content = _text(args.get("content"))
        return CliCall(
            kind="write", path=_text(args["file_path"]), content=content, folded=_long(content)
        )
    if tool == "Edit" and isinstance(args.get("file_path"), str):
        old, new = _text(args.get("old_string")), _text(args.get("new_string"))
        return CliCall(
            kind="edit", path=_text(args["file_path"]), old=old, new=new, folded=_long(old, new)
        )
    if tool == "WebFetch" and isinstance(args.get("url"), str):
        url = _text(args["url"])
        link = safe_link(args["url"])  # the host a browser would go to, or none shown
        return CliCall(
            kind="fetch",
            url=url,
            host=link.host if link is not None else "",
            description=_text(args.get("prompt")),
        )
    return CliCall(kind="arguments")
