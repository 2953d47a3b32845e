"""Personal API tokens: created, checked and revoked here."""

import hashlib
import secrets

from django.db import transaction
from django.utils import timezone

from api.models import ApiToken
from core import events
from core.text import clean_text

PREFIX = "parley_"
NAME_MAX_CHARS = ApiToken._meta.get_field("name").max_length


def digest(token: str) -> str:
    # Tokens are 256 random bits, so a plain hash is enough (no password stretching needed).
    return hashlib.sha256(token.encode()).hexdigest()


def create_token(*, user, name: str) -> tuple[ApiToken, str]:
    """A new token for `user`: the record, and the token itself (shown once, never stored)."""
    token = PREFIX + secrets.token_urlsafe(32)
    record = ApiToken.objects.create(
        user=user,
        name=clean_text(name)[:NAME_MAX_CHARS] or "API token",
        prefix=token[: len(PREFIX) + 6],
        digest=digest(token),
    )
    return record, token


def token_record(token: str) -> ApiToken | None:
    """The token's record if it is valid and its user active, else None."""
    if not token.startswith(PREFIX):
        return None
    record = ApiToken.objects.select_related("user").filter(digest=digest(token)).first()
    if record is None or not record.user.is_active:
        return None
    now = timezone.now()
    if record.last_used_at is None or (now - record.last_used_at).total_seconds() > 60:
        ApiToken.objects.filter(pk=record.pk).update(last_used_at=now)
    return record


def user_for_token(token: str):
    """The active user a token belongs to, or None."""
    record = token_record(token)
    return record.user if record is not None else None


def token_still_valid(token_id: int) -> bool:
    """Whether the token is still there and its user still active (open event streams
    re-check this)."""
    return ApiToken.objects.filter(pk=token_id, user__is_active=True).exists()


@transaction.atomic
def revoke_token(*, user, token_id: int) -> bool:
    """Delete the token; after commit, its open event streams end (chat.live.sessions)."""
    deleted, _ = ApiToken.objects.filter(user=user, pk=token_id).delete()
    if deleted:
        events.send_on_commit(events.user_group(user.pk), events.auth_changed(user.pk))
    return bool(deleted)


@transaction.atomic
def revoke_all_tokens(*, user) -> int:
    """Delete every token of the user (signing out everywhere); after commit, their open
    event streams end. Returns how many were revoked."""
    deleted, _ = ApiToken.objects.filter(user=user).delete()
    if deleted:
        events.send_on_commit(events.user_group(user.pk), events.auth_changed(user.pk))
    return deleted


def signed_out_everywhere(sender, *, user, **kwargs) -> None:
    """accounts.signals.signed_out_everywhere: the user's tokens end with their sessions."""
    revoke_all_tokens(user=user)
