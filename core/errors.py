"""The errors every app raises and maps to a response: each carries the translatable message a
user sees and an HTTP status (ParleyError), and the per-user limits' refusals (RateLimited),
which core.limits raises. Each app's own errors subclass them."""

import redis
from django.conf import settings
from django.utils.translation import gettext_lazy as _

# What redis-py raises when Redis cannot be reached or does not answer in time, and so what
# Django's Redis cache and channels-redis's layers raise (both use redis-py's clients):
# refused, reset or closed connections, a server still loading its data, timeouts.
REDIS_UNAVAILABLE = (redis.exceptions.ConnectionError, redis.exceptions.TimeoutError)


class ParleyError(Exception):
    status = 400
    default_message = _("Something went wrong.")

    def __init__(self, message: str | None = None) -> None:
        self.message = message or self.default_message
        super().__init__(str(self.message))


class ServiceUnavailable(ParleyError):
    """Something the request needs (Redis: the limits' counters, the turn queue, live events)
    cannot be reached for now: HTTP 503, with the seconds after which trying again may work."""

    status = 503
    retry_after = 5
    default_message = _("Parley is briefly unavailable. Try again in a moment.")


class RateLimited(ParleyError):
    """Too much at once: HTTP 429, with the seconds after which trying again may work."""

    status = 429

    def __init__(self, retry_after: int, message: str | None = None) -> None:
        self.retry_after = max(1, int(retry_after))
        super().__init__(message)


class PastARate(RateLimited):
    """Past a per-minute rate: `template` says so, with the %(seconds)s until its window ends."""

    template: str  # each subclass's message

    def __init__(self, retry_after: int) -> None:
        super().__init__(retry_after, self.template % {"seconds": max(1, int(retry_after))})


class TooManyMessages(PastARate):
    template = _("You sent too many messages in a minute. Try again in %(seconds)s seconds.")


class TooManyConversations(PastARate):
    template = _(
        "You started too many conversations in a minute. Try again in %(seconds)s seconds."
    )


class TooManyStreams(RateLimited):
    def __init__(self, retry_after: int) -> None:
        super().__init__(
            retry_after,
            _("Too many event streams are open for you (at most %(limit)s). Close one first.")
            % {"limit": settings.PARLEY_MAX_STREAMS},
        )
