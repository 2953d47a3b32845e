"""The bot's messages, written to the webhooks' outbox (its `slack` channel) in the
transaction that made them needed, and sent by its sweep, which retries them (after Slack's
Retry-After on a 429): a question that waits for a linked user is posted to them as a direct
message (questions.notifications.question_changed: asked, or assigned to them); once it no
longer waits for them (resolved anywhere, or assigned to someone else), each of its messages
is rewritten to say so, its buttons gone (question_closed). What is sent is read when it is
sent: a question resolved by then is not posted at all."""

import json
import uuid

from django.conf import settings
from django.utils import timezone, translation

from accounts.selectors import preferences_for
from chat.models import MemberRole
from core import jobs
from questions import notifications
from questions.models import Question, QuestionStatus
from questions.notifications import QuestionEvent
from questions.selectors import recipient_ids
from reach import outbox as reach_outbox
from slackbot import blocks, client, linking
from slackbot.models import SlackChannel, SlackLink, SlackMessage
from webhooks.channels import Send, Sent, Skip
from webhooks.models import Delivery, DeliveryChannel, DeliveryStatus

# The event type of an update of a posted message (a post's is the question event's).
UPDATE_EVENT = "slack.update"


def enqueue(sender, *, event: QuestionEvent, **kwargs) -> None:
    """Post the question to each linked user it now waits for; when it was assigned, show
    it closed to those it no longer waits for."""
    if not client.configured():
        return
    question = event.question
    if reach_outbox.reaches(event):
        channel = (
            SlackChannel.objects.filter(conversation_id=question.conversation_id)
            .values_list("channel_id", flat=True)
            .first()
        )
        if channel and event.type in reach_outbox.WAITING:
            body = {"question": question.pk, "shared": True}
            _queue([_row(event.owner_id, event.type, body, target=channel)])
        else:
            _queue(_direct_messages(event))
    if event.type == notifications.ASSIGNED:
        direct = open_messages(question).filter(shared=False)
        _queue_updates(direct.exclude(recipient_id__in=event.recipient_ids))


def _direct_messages(event: QuestionEvent) -> list[Delivery]:
    """A post to each linked user the question waits for, but one whose post of it is queued
    already (asked, then assigned to them before the outbox ran: one message, not two; once it
    is sent, `_prepare_post` finds its message)."""
    body = {"question": event.question.pk}
    queued = Delivery.objects.filter(
        channel=DeliveryChannel.SLACK,
        status=DeliveryStatus.PENDING,
        recipient_id__in=event.recipient_ids,
        body=json.dumps(body),
    ).values_list("recipient_id", flat=True)
    links = (
        SlackLink.objects.filter(
            user_id__in=event.recipient_ids, confirmed_at__isnull=False, user__is_active=True
        )
        .exclude(user_id__in=queued)
        .values_list("user_id", "slack_user_id")
    )
    return [_row(user_id, event.type, body, target=slack_id) for user_id, slack_id in links]


def enqueue_close(sender, *, question: Question, **kwargs) -> None:
    """The question was resolved: rewrite each of its open messages."""
    if client.configured():
        _queue_updates(open_messages(question))


def members_changed(sender, *, conversation, user_id: int, role: str | None, **kwargs) -> None:
    """Someone was removed from a conversation or made a viewer (a receiver of
    chat.sharing.access_changed): the direct messages of its questions that waited for them
    say they no longer do."""
    if not client.configured() or role == MemberRole.PARTICIPANT:
        return
    _queue_updates(
        SlackMessage.objects.filter(
            question__conversation=conversation,
            question__status=QuestionStatus.PENDING,
            recipient_id=user_id,
            shared=False,
            closed_at__isnull=True,
        )
    )


def open_messages(question: Question):
    return SlackMessage.objects.filter(question=question, closed_at__isnull=True)


def _queue_updates(messages) -> None:
    _queue(
        [
            _row(recipient_id, UPDATE_EVENT, {"message": pk})
            for pk, recipient_id in messages.values_list("pk", "recipient_id")
        ]
    )


def _row(recipient_id: int, event_type: str, body: dict, *, target: str = "") -> Delivery:
    return Delivery(
        channel=DeliveryChannel.SLACK,
        recipient_id=recipient_id,
        target=target,
        event_id=f"slack_{uuid.uuid4().hex}",
        event_type=event_type,
        body=json.dumps(body),
    )


def _queue(rows: list[Delivery]) -> None:
    if rows:
        Delivery.objects.bulk_create(rows)
        jobs.run_soon_on_commit()


def prepare(delivery: Delivery) -> Send:
    """The Web API call of a queued delivery (webhooks.channels.Channel.prepare)."""
    if not client.configured():
        raise Skip
    if delivery.event_type == linking.LINK_EVENT:
        return _prepare_link(delivery)
    if delivery.event_type == UPDATE_EVENT:
        return _prepare_update(delivery)
    return _prepare_post(delivery)


def _language(user) -> str:
    return preferences_for(user).language or settings.LANGUAGE_CODE


def _prepare_post(delivery: Delivery) -> Send:
    """A question's direct message; Skip if it no longer waits for its recipient, the
    recipient's link changed, or they have its message already."""
    question = reach_outbox.waiting_question(delivery)
    if json.loads(delivery.body).get("shared"):
        return _prepare_channel_post(delivery, question)
    recipient = delivery.recipient
    link = SlackLink.objects.filter(
        user=recipient, slack_user_id=delivery.target, confirmed_at__isnull=False
    ).first()
    if (
        link is None
        or not recipient.is_active
        or recipient.pk not in recipient_ids(question)
        or open_messages(question).filter(recipient=recipient).exists()
    ):
        raise Skip
    with translation.override(_language(recipient)):
        message = blocks.question_message(question)

    def send() -> Sent:
        response = client.call("chat.postMessage", channel=link.slack_user_id, **message)
        return Sent(200, {"channel": response["channel"], "ts": response["ts"]})

    return send


def _prepare_channel_post(delivery: Delivery, question: Question) -> Send:
    """A question's message in the channel its conversation is connected to; Skip if the
    conversation was disconnected (or connected elsewhere) since, or the channel has it."""
    connected = SlackChannel.objects.filter(
        conversation_id=question.conversation_id, channel_id=delivery.target
    ).exists()
    if not connected or open_messages(question).filter(shared=True).exists():
        raise Skip
    with translation.override(_language(delivery.recipient)):
        message = blocks.question_message(question)

    def send() -> Sent:
        response = client.call("chat.postMessage", channel=delivery.target, **message)
        receipt = {"channel": response["channel"], "ts": response["ts"], "shared": True}
        return Sent(200, receipt)

    return send


def _prepare_update(delivery: Delivery) -> Send:
    """A posted message rewritten closed; Skip if it was already, or if the question waits
    for its recipient again."""
    body = json.loads(delivery.body)
    message = (
        SlackMessage.objects.select_related(
            "question__conversation",
            "question__message",
            "question__answered_by",
            "question__assigned_to",
        )
        .filter(pk=body["message"], closed_at__isnull=True)
        .first()
    )
    if message is None:
        raise Skip
    question = message.question
    if question.is_pending and (message.shared or message.recipient_id in recipient_ids(question)):
        raise Skip
    with translation.override(_language(delivery.recipient)):
        closed = blocks.closed_message(question)

    def send() -> Sent:
        client.call("chat.update", channel=message.channel, ts=message.ts, **closed)
        return Sent(200, {"closed": message.pk})

    return send


def _prepare_link(delivery: Delivery) -> Send:
    """The Confirm button of a link asked for in Settings; Skip once it is confirmed,
    replaced or unlinked."""
    body = json.loads(delivery.body)
    link = SlackLink.objects.filter(
        pk=body["link"], nonce=body["nonce"], confirmed_at__isnull=True
    ).first()
    if link is None:
        raise Skip
    with translation.override(_language(delivery.recipient)):
        message = blocks.link_message(username=delivery.recipient.get_username(), nonce=link.nonce)

    def send() -> int:
        client.call("chat.postMessage", channel=link.slack_user_id, **message)
        return 200

    return send


def delivered(delivery: Delivery, receipt: dict) -> None:
    """Keep where a question's message was posted (and rewrite it at once if the question
    was resolved while it was sent); mark a rewritten one closed."""
    if "closed" in receipt:
        SlackMessage.objects.filter(pk=receipt["closed"]).update(closed_at=timezone.now())
        return
    if "ts" not in receipt:
        return
    question_id = json.loads(delivery.body)["question"]
    shared = bool(receipt.get("shared"))
    message, _created = SlackMessage.objects.get_or_create(
        channel=receipt["channel"],
        ts=receipt["ts"],
        defaults={
            "question_id": question_id,
            "recipient_id": delivery.recipient_id,
            "shared": shared,
        },
    )
    question = Question.objects.filter(pk=question_id).select_related("conversation").first()
    if question is not None and (
        not question.is_pending
        or (not shared and delivery.recipient_id not in recipient_ids(question))
    ):
        _queue_updates(SlackMessage.objects.filter(pk=message.pk))
