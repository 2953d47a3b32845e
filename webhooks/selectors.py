"""Webhook reads: a user's webhooks and deliveries, and which owners have a webhook at all
(cached, so that an event no webhook wants costs no query)."""

import uuid

from django.core.cache import cache
from django.db import transaction

from webhooks.models import Delivery, Webhook

LOG_LENGTH = 50
# The cached set of owners is stored under the current generation: a change starts a new one
# once it commits, so no reader can keep a set from before it (Django's cache, shared through
# Redis when there is one). The entries also lapse after a while, to bound any surprise.
GENERATION_KEY = "parley:webhooks:generation"
OWNERS_SECONDS = 600


def webhooks_for_user(*, user):
    return Webhook.objects.filter(owner=user)


def deliveries_for_user(*, user) -> list[Delivery]:
    """The latest deliveries to the user's own webhooks, newest first."""
    return list(Delivery.objects.filter(webhook__owner=user).select_related("webhook")[:LOG_LENGTH])


def webhook_owners() -> frozenset[int | None]:
    """The owners of an enabled webhook (None for a deployment's own), read once per
    generation of the webhooks (`webhooks_changed`)."""
    generation = cache.get(GENERATION_KEY)
    if generation is None:
        generation = uuid.uuid4().hex
        cache.add(GENERATION_KEY, generation, timeout=None)
        generation = cache.get(GENERATION_KEY, generation)
    key = f"parley:webhooks:owners:{generation}"
    owners = cache.get(key)
    if owners is None:
        enabled = Webhook.objects.filter(disabled_at__isnull=True)
        owners = frozenset(enabled.values_list("owner_id", flat=True).distinct())
        cache.set(key, owners, timeout=OWNERS_SECONDS)
    return owners


def webhooks_changed(*args, **kwargs) -> None:
    """A webhook was added, removed, disabled or enabled: the owners are read again, from
    now on in this transaction and once more after it commits, when every process sees the
    change (a signal receiver, and called by the writes that bypass signals)."""
    _new_generation()
    transaction.on_commit(_new_generation)


def _new_generation() -> None:
    cache.set(GENERATION_KEY, uuid.uuid4().hex, timeout=None)
