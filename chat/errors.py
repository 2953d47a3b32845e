"""Domain errors. Each carries the translatable message a user sees and an HTTP status."""

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


class ConversationNotFound(ParleyError):
    status = 404
    default_message = _("That conversation does not exist.")


# What a member is told when their role does not allow what they tried.
VIEWER_REFUSED = _("You can only read this conversation: its owner shared it with you as a viewer.")
OWNER_ONLY = _("Only the conversation’s owner can do that.")


class NotAllowed(ParleyError):
    """A member of the conversation tried what their role does not allow (a stranger gets
    ConversationNotFound instead)."""

    status = 403
    default_message = VIEWER_REFUSED


class EmptyMessage(ParleyError):
    default_message = _("Type a message first.")


class MessageTooLong(ParleyError):
    status = 413

    def __init__(self) -> None:
        super().__init__(
            _("That message is too long: the limit is %(limit)s characters.")
            % {"limit": f"{settings.PARLEY_MAX_MESSAGE_CHARS:,}"}
        )


class AgentBusy(ParleyError):
    status = 409
    default_message = _("Parley is still replying. Wait for it to finish, or stop it.")


class NothingToRetry(ParleyError):
    status = 409
    default_message = _("There is nothing to retry: the last turn did not fail.")


class NothingToStop(ParleyError):
    status = 409
    default_message = _("The agent is not running.")


class QuestionPending(ParleyError):
    status = 409
    default_message = _("Parley is waiting for your answer: answer or reject the question first.")


class NoAgentHere(ParleyError):
    status = 409
    default_message = _(
        "An agent outside Parley asks its questions in this conversation. It reads your "
        "answers to them, not other messages."
    )


class NothingToRegenerate(ParleyError):
    status = 409
    default_message = _("There is no reply to regenerate yet.")


class MessageNotEditable(ParleyError):
    status = 409
    default_message = _("This message cannot be edited: only a message that asked something can.")


class SearchTooLong(ParleyError):
    def __init__(self, limit: int) -> None:
        super().__init__(
            _("Search for at most %(limit)s characters.") % {"limit": limit},
        )


class SearchTooSlow(ParleyError):
    default_message = _("That search took too long. Try more specific words.")


class RateLimited(ParleyError):
    """Too much at once: HTTP 429, with the seconds after which trying again may work."""

    status = 429

    def __init__(self, retry_after: int, message: str | None = None) -> None:
        self.retry_after = max(1, int(retry_after))
        super().__init__(message)


class TooManyRunningTurns(RateLimited):
    def __init__(self, retry_after: int) -> None:
        super().__init__(
            retry_after,
            _(
                "The agent is already replying in %(limit)s of your conversations: wait for "
                "one to finish, then try again."
            )
            % {"limit": settings.PARLEY_MAX_RUNNING_TURNS},
        )


class TooManyMessages(RateLimited):
    def __init__(self, retry_after: int) -> None:
        super().__init__(
            retry_after,
            _("You sent too many messages in a minute. Try again in %(seconds)s seconds.")
            % {"seconds": max(1, int(retry_after))},
        )


class TooManyToolCalls(RateLimited):
    def __init__(self, retry_after: int) -> None:
        super().__init__(
            retry_after,
            _("You made too many MCP tool calls in a minute. Try again in %(seconds)s seconds.")
            % {"seconds": max(1, int(retry_after))},
        )


class TooManyConversations(RateLimited):
    def __init__(self, retry_after: int) -> None:
        super().__init__(
            retry_after,
            _("You started too many conversations in a minute. Try again in %(seconds)s seconds.")
            % {"seconds": max(1, int(retry_after))},
        )


class TooManyStreams(RateLimited):
    def __init__(self, retry_after: int) -> None:
        super().__init__(
            retry_after,
            _("Too many event streams are open for you (at most %(limit)s). Close one first.")
            % {"limit": settings.PARLEY_MAX_STREAMS},
        )


class TooManySearches(RateLimited):
    def __init__(self, retry_after: int) -> None:
        super().__init__(
            retry_after,
            _("You searched too often in a minute. Try again in %(seconds)s seconds.")
            % {"seconds": max(1, int(retry_after))},
        )


class SearchRunning(RateLimited):
    def __init__(self, retry_after: int) -> None:
        super().__init__(
            retry_after, _("Your previous search is still running. Try again in a moment.")
        )


class TooManySubagents(Exception):
    """Starting these sub-agents would pass PARLEY_MAX_RUNNING_SUBAGENTS. Its words are for
    the model, which gets them as the spawn call's error result."""

    def __init__(self, *, running: int, limit: int) -> None:
        super().__init__(
            f"At most {limit} sub-agents may run at once for this user, and {running} are "
            f"running now. Start at most {max(0, limit - running)}, or do the tasks yourself."
        )
