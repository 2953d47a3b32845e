"""The OAuth clients a user has let use Parley's /mcp/ ("Connected apps" in Settings): listed
and revoked here."""

from dataclasses import dataclass
from datetime import datetime
from urllib.parse import urlsplit

from django.db import transaction
from django.db.models import Min
from django.utils import timezone
from oauth2_provider.models import AccessToken, Application, Grant, RefreshToken

from core import events


@dataclass(frozen=True, kw_only=True)
class ConnectedApp:
    application_id: int
    # The client's own name (it registered it), else its client id.
    name: str
    # Where the client's redirects go: the hosts the user is sent back to.
    redirect_hosts: list[str]
    connected_at: datetime


def redirect_hosts(application: Application) -> list[str]:
    """The hosts of the client's registered redirect URIs, in their order, once each."""
    hosts = (urlsplit(uri).netloc for uri in application.redirect_uris.split())
    return list(dict.fromkeys(host for host in hosts if host))


def connected_apps(*, user) -> list[ConnectedApp]:
    """The clients `user` has granted that still hold a live token, newest first."""
    now = timezone.now()
    live = AccessToken.objects.filter(user=user, expires__gt=now).values("application_id")
    unused = RefreshToken.objects.filter(user=user, revoked__isnull=True).values("application_id")
    firsts = {
        row["application_id"]: row["first"]
        for row in RefreshToken.objects.filter(user=user)
        .values("application_id")
        .annotate(first=Min("created"))
    }
    applications = Application.objects.filter(pk__in=live.union(unused)).order_by("-pk")
    return [
        ConnectedApp(
            application_id=application.pk,
            name=application.name or application.client_id,
            redirect_hosts=redirect_hosts(application),
            connected_at=firsts.get(application.pk, application.created),
        )
        for application in applications
    ]


@transaction.atomic
def revoke_app(*, user, application_id: int) -> bool:
    """End every token and unused code `user` granted the client. After commit the user's
    waiting MCP calls wake (core.events.auth_changed) and, their grant gone, end; the next
    request with those tokens is refused. Returns whether there was anything to revoke."""
    mine = {"user": user, "application_id": application_id}
    deleted = 0
    for model in (RefreshToken, AccessToken, Grant):
        count, _ = model.objects.filter(**mine).delete()
        deleted += count
    if deleted:
        events.send_on_commit(events.user_group(user.pk), events.auth_changed(user.pk))
    return bool(deleted)


@transaction.atomic
def revoke_all_apps(*, user) -> int:
    """End every client's tokens and codes of `user` (signing out everywhere)."""
    deleted = 0
    for model in (RefreshToken, AccessToken, Grant):
        count, _ = model.objects.filter(user=user).delete()
        deleted += count
    if deleted:
        events.send_on_commit(events.user_group(user.pk), events.auth_changed(user.pk))
    return deleted


def signed_out_everywhere(sender, *, user, **kwargs) -> None:
    """accounts.signals.signed_out_everywhere: the user's grants end with their sessions."""
    revoke_all_apps(user=user)
