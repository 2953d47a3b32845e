"""The e-mails and pushes a waiting question makes, written to the webhooks' outbox
(webhooks.models.Delivery) in the transaction that asked it (questions.notifications), so a
turn never waits for, nor fails with, a mail server or a push service."""

import json
import logging
import uuid

from django.contrib.auth import get_user_model

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
    """Queue an e-mail for each recipient who asked for them (and has an address), and a push
    to each browser of each recipient with no Parley page open (core.presence). What is sent
    is read when it is sent: a question resolved by then is not sent at all."""
    if not reaches(event):
        return
    user_ids = event.recipient_ids
    body = json.dumps({"question": event.question.pk})
    rows = [
        Delivery(
            channel=DeliveryChannel.EMAIL,
            recipient_id=user_id,
            event_id=f"mail_{uuid.uuid4().hex}",
            event_type=event.type,
            body=body,
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
                event_type=event.type,
                body=body,
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
