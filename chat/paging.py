"""Pages of a transcript: a bounded run of consecutive messages, so that what reads a long
conversation costs the page, not the transcript. The API and the admin page this way."""

from dataclasses import dataclass

from django.db.models import QuerySet

from chat.models import Message


@dataclass(frozen=True)
class TranscriptPage:
    """Consecutive messages in transcript order (ascending `order`), and whether the
    transcript goes on past either end (an empty page has no ends: neither)."""

    messages: list[Message]
    has_older: bool
    has_newer: bool

    @property
    def first(self) -> Message | None:
        return self.messages[0] if self.messages else None

    @property
    def last(self) -> Message | None:
        return self.messages[-1] if self.messages else None


def transcript_page(
    messages: QuerySet[Message],
    *,
    limit: int,
    before: int | None = None,
    after: int | None = None,
) -> TranscriptPage:
    """One query. `messages`: one conversation's messages (the caller has checked access).
    Without a place, the newest `limit` of them; with `before`, the `limit` just older than
    the message at that `order`; with `after`, the `limit` just newer than it. `before` and
    `after` are the `order` of a message of that conversation (at most one of them)."""
    if after is not None:
        found = list(messages.filter(order__gt=after).order_by("order")[: limit + 1])
        return TranscriptPage(found[:limit], has_older=bool(found), has_newer=len(found) > limit)
    if before is not None:
        messages = messages.filter(order__lt=before)
    found = list(messages.order_by("-order")[: limit + 1])
    return TranscriptPage(
        found[:limit][::-1],
        has_older=len(found) > limit,
        has_newer=before is not None and bool(found),
    )
