"""The e-mails and pushes a waiting question makes (and an agent's notification, such as
"Claude is waiting for your input"), written to the webhooks' outbox (webhooks.models.Delivery)
in the transaction that asked it (questions.notifications), so a turn never waits for, nor
fails with, a mail server or a push service."""

import json
import logging
import uuid
from dataclasses import dataclass

from django.conf import settings
from django.contrib.auth import get_user_model
from django.urls import reverse

from chat.models import Conversation, Message
from core import jobs, presence
from questions import notifications
from questions.models import Question
from questions.notifications import QuestionEvent
from reach.models import PushSubscription
from webhooks.channels import Skip
from webhooks.models import Delivery, DeliveryChannel

logger = logging.getLogger("parley.reach")

# The events that mean a question now waits for someone.
WAITING = (notifications.ASKED, notifications.APPROVAL_REQUESTED)

# An agent's notification (a message of its conversation): the event type of its deliveries.
NOTIFIED = "agent.notification"


def reaches(event: QuestionEvent) -> bool:
    """Whether the event means a question now waits for someone it did not wait for: asked,
    or assigned to a person (who did not assign it to themself)."""
    if event.type in WAITING:
        return True
    question = event.question
    return (
        event.type == notifications.ASSIGNED
        and question.assigned_to_id is not None
        and question.assigned_to_id != question.assigned_by_id
    )


def enqueue(sender, *, event: QuestionEvent, **kwargs) -> None:
    """Queue a question's e-mails and pushes when it now waits for someone. What is sent is
    read when it is sent: a question resolved by then is not sent at all."""
    if reaches(event):
        queue(
            user_ids=event.recipient_ids,
            event_type=event.type,
            body={"question": event.question.pk},
        )


def queue(*, user_ids, event_type: str, body: dict) -> None:
    """Queue an e-mail for each of the users who asked for them (and has an address), and a
    push to each browser of each of them with no Parley page open (core.presence)."""
    body_text = json.dumps(body)
    rows = [
        Delivery(
            channel=DeliveryChannel.EMAIL,
            recipient_id=user_id,
            event_id=f"mail_{uuid.uuid4().hex}",
            event_type=event_type,
            body=body_text,
        )
        for user_id in get_user_model()
        .objects.filter(pk__in=user_ids, is_active=True, preferences__email_questions=True)
        .exclude(email="")
        .values_list("pk", flat=True)
    ]
    subscriptions = list(
        PushSubscription.objects.filter(user_id__in=user_ids).values_list("pk", "user_id")
    )
    if subscriptions:
        try:
            present = presence.open_pages_of(sorted({user_id for _pk, user_id in subscriptions}))
        except Exception:  # a cache that cannot be reached costs a needless push, not the turn
            logger.warning("presence unknown: pushing to every subscribed browser", exc_info=True)
            present = set()
        rows += [
            Delivery(
                channel=DeliveryChannel.PUSH,
                recipient_id=user_id,
                target=str(pk),
                event_id=f"push_{uuid.uuid4().hex}",
                event_type=event_type,
                body=body_text,
            )
            for pk, user_id in subscriptions
            if user_id not in present
        ]
    if rows:
        Delivery.objects.bulk_create(rows)
        jobs.run_soon_on_commit()


def waiting_question(delivery: Delivery) -> Question:
    """The question an e-mail or a push of the outbox is about, read when it is sent, with
    its conversation and message; Skip if it no longer waits (resolved first, deleted)."""
    question = (
        Question.objects.select_related("conversation", "message")
        .filter(pk=json.loads(delivery.body)["question"])
        .first()
    )
    if question is None or not question.is_pending or question.conversation.deleted_at is not None:
        raise Skip
    return question


@dataclass(frozen=True)
class Notice:
    """An agent's notification, as its e-mail and push say it."""

    conversation: Conversation
    title: str
    text: str

    @property
    def url(self) -> str:
        link = reverse("chat:conversation_detail", args=[self.conversation.pk])
        return f"{settings.PUBLIC_URL}{link}"


def notify(*, message: Message, title: str, text: str) -> None:
    """Queue the e-mails and pushes of an agent's notification, shown as `message`, to the
    conversation's owner, as a waiting question's are (same settings, same presence)."""
    queue(
        user_ids=[message.conversation.owner_id],
        event_type=NOTIFIED,
        body={"notice": message.pk, "title": title, "text": text},
    )


def is_notice(delivery: Delivery) -> bool:
    return delivery.event_type == NOTIFIED


def waiting_notice(delivery: Delivery) -> Notice:
    """The notification a delivery is about, read when it is sent; Skip if the conversation
    moved on since (a newer message, such as the approval the notice announced, which reaches
    the person itself) or was deleted."""
    body = json.loads(delivery.body)
    message = Message.objects.select_related("conversation").filter(pk=body["notice"]).first()
    if message is None:
        raise Skip
    conversation = message.conversation
    if conversation.deleted_at is not None or message.order != conversation.message_count - 1:
        raise Skip
    return Notice(conversation=conversation, title=body["title"], text=body["text"])
