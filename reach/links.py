"""The links an e-mail gives each option of a one-question choice: signed
(django.core.signing), single use, ending with the question, needing no login.

Opening one (a GET, which mail scanners do too) only shows the question and that answer;
confirming it (a POST) answers through questions.resolving with `answered_via` email and the
recipient as `answered_by`. The link's row is marked used by a conditional update in the same
transaction as the answer: of two confirmations, only one answers, and a confirmation whose
answer fails (the question was resolved meanwhile) leaves the link unused.
"""

import secrets
from dataclasses import dataclass

from django.conf import settings
from django.core import signing
from django.db import transaction
from django.urls import reverse
from django.utils import timezone

from chat.errors import ConversationNotFound, NotAllowed
from chat.models import ACTING_ROLES
from chat.selectors import role_of
from questions import resolving
from questions.errors import QuestionAlreadyResolved
from questions.models import Question, QuestionKind, QuestionStatus
from questions.payloads import EMAIL, Answer
from questions.schemas import Option
from reach.errors import (
    ANSWERED_ALREADY,
    EXPIRED_ALREADY,
    BadLink,
    LinkRevoked,
    LinkUsed,
    QuestionClosed,
    UnknownLink,
)
from reach.models import AnswerLink

SALT = "reach.answer-link"
# The question tools whose one question, when it is a single choice, gets a link per option.
CHOICE_KINDS = (QuestionKind.QUESTION, QuestionKind.ASK_USER_QUESTION, QuestionKind.CONFIRM_ACTION)


def choice_options(question: Question) -> list[Option]:
    """The options of a question that one click can answer (one question, one choice among
    its options); [] for any other question, approval or request from a tool."""
    if question.kind not in CHOICE_KINDS or len(question.questions) != 1:
        return []
    [asked] = question.request.questions
    return [] if asked.multiple else list(asked.options)


@dataclass(frozen=True)
class OptionLink:
    label: str
    description: str
    url: str


def option_links(*, question: Question, recipient) -> list[OptionLink]:
    """One absolute link (under PUBLIC_URL) per option, for this recipient; the same links
    again if asked again (a retried e-mail). [] unless the question is a single choice."""
    options = choice_options(question)
    if not options:
        return []
    rows = {
        row.option: row for row in AnswerLink.objects.filter(question=question, recipient=recipient)
    }
    missing = [
        AnswerLink(
            question=question, recipient=recipient, option=index, nonce=secrets.token_urlsafe(24)
        )
        for index in range(len(options))
        if index not in rows
    ]
    if missing:
        AnswerLink.objects.bulk_create(missing, ignore_conflicts=True)
        rows = {
            row.option: row
            for row in AnswerLink.objects.filter(question=question, recipient=recipient)
        }
    return [
        OptionLink(option.label, option.description, absolute_url(rows[index]))
        for index, option in enumerate(options)
    ]


def token_for(link: AnswerLink) -> str:
    return signing.dumps({"l": link.pk, "n": link.nonce}, salt=SALT)


def absolute_url(link: AnswerLink) -> str:
    return settings.PUBLIC_URL + reverse("reach:answer", args=[token_for(link)])


@dataclass(frozen=True)
class OpenedLink:
    link: AnswerLink
    question: Question
    label: str


def open_link(token: str) -> OpenedLink:
    """The link of `token`, its question and the answer it gives, if it may still answer.
    Raises BadLink (the signature does not verify), UnknownLink, LinkRevoked (its recipient
    may no longer answer in the conversation), LinkUsed, QuestionClosed."""
    try:
        data = signing.loads(token, salt=SALT)
        link_id, nonce = int(data["l"]), str(data["n"])
    except (signing.BadSignature, KeyError, TypeError, ValueError):
        raise BadLink from None
    link = (
        AnswerLink.objects.select_related(
            "question__conversation", "question__message", "recipient"
        )
        .filter(pk=link_id, nonce=nonce, recipient__is_active=True)
        .first()
    )
    if link is None or link.question.conversation.deleted_at is not None:
        raise UnknownLink
    question = link.question
    options = choice_options(question)
    if link.option >= len(options):
        raise UnknownLink
    # Before anything of the question is shown: its recipient may still answer there.
    if role_of(user=link.recipient, conversation_id=question.conversation_id) not in ACTING_ROLES:
        raise LinkRevoked
    if link.used_at is not None:
        raise LinkUsed
    check_waiting(question)
    return OpenedLink(link=link, question=question, label=options[link.option].label)


def check_waiting(question: Question) -> None:
    """Raise QuestionClosed, saying why, unless the question still waits (its deadline, if
    any, not yet passed even if the sweep has not expired it yet)."""
    if question.status in (QuestionStatus.ANSWERED, QuestionStatus.AUTO_RESOLVED):
        raise QuestionClosed(ANSWERED_ALREADY)
    expired = question.expires_at is not None and question.expires_at <= timezone.now()
    if question.status == QuestionStatus.EXPIRED or (question.is_pending and expired):
        raise QuestionClosed(EXPIRED_ALREADY)
    if not question.is_pending:
        raise QuestionClosed


@transaction.atomic
def answer_by_link(*, token: str) -> OpenedLink:
    """Answer the link's question with its option, as its recipient, exactly once. Raises as
    open_link does; a question resolved meanwhile raises QuestionClosed and uses nothing."""
    opened = open_link(token)
    used = AnswerLink.objects.filter(pk=opened.link.pk, used_at__isnull=True).update(
        used_at=timezone.now()
    )
    if not used:
        raise LinkUsed
    question = opened.question
    try:
        resolving.answer_question(
            user=opened.link.recipient,
            conversation_id=question.conversation_id,
            tool_call_id=question.tool_call_id,
            answers=[Answer(labels=[opened.label])],
            via=EMAIL,
        )
    except QuestionAlreadyResolved:
        question.refresh_from_db(fields=["status"])
        check_waiting(question)
        raise QuestionClosed from None
    except ConversationNotFound:
        raise UnknownLink from None
    except NotAllowed:  # made a viewer since open_link read the role
        raise LinkRevoked from None
    return opened
