"""The chat's errors (core.errors holds those every app shares). Each carries the translatable
message a user sees and an HTTP status."""

from django.conf import settings
from django.utils.translation import gettext_lazy as _

from core.errors import ParleyError, PastARate, RateLimited


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


class TooManySearches(PastARate):
    template = _("You searched too often in a minute. Try again in %(seconds)s seconds.")


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
