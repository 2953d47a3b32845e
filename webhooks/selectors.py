from webhooks.models import Delivery, Webhook

LOG_LENGTH = 50


def webhooks_for_user(*, user):
    return Webhook.objects.filter(owner=user)


def deliveries_for_user(*, user) -> list[Delivery]:
    """The latest deliveries to the user's own webhooks, newest first."""
    return list(Delivery.objects.filter(webhook__owner=user).select_related("webhook")[:LOG_LENGTH])
