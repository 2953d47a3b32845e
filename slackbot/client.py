"""The Slack Web API, as slack_sdk's WebClient calls it at SLACK_API_URL with the bot token; a
refusal from Slack becomes what the outbox understands (webhooks.channels): a 429 says when
to try again (RetryLater), anything else is a failure to retry with Slack's status."""

from collections.abc import Callable

from django.conf import settings
from slack_sdk import WebClient
from slack_sdk.errors import SlackApiError
from slack_sdk.web import SlackResponse

from webhooks.channels import RetryLater

# Seconds Slack's Retry-After is taken to be when a 429 names none.
DEFAULT_RETRY_AFTER = 30.0


class SlackFailed(Exception):
    """Slack answered a call with an error (`ok: false`, or an HTTP error status)."""

    def __init__(self, method: str, status_code: int | None, error: str) -> None:
        self.status_code = status_code
        self.error = error
        super().__init__(f"{method}: HTTP {status_code}, {error}")


def configured() -> bool:
    """Whether the operator set up the Slack app (a bot token)."""
    return bool(settings.SLACK_BOT_TOKEN)


def web_client() -> WebClient:
    base_url = settings.SLACK_API_URL
    return WebClient(
        token=settings.SLACK_BOT_TOKEN,
        base_url=base_url if base_url.endswith("/") else base_url + "/",
        timeout=int(max(settings.WEBHOOK_TIMEOUT, 1)),
    )


def call(method: str, **arguments) -> SlackResponse:
    """Call the Web API `method` ("chat.postMessage") with the bot token. Raises RetryLater
    on a 429 (after its Retry-After), SlackFailed on any other error answer."""
    operation: Callable[..., SlackResponse] = getattr(web_client(), method.replace(".", "_"))
    try:
        return operation(**arguments)
    except SlackApiError as error:
        response = error.response
        status = response.status_code
        reason = str(response.get("error", "")) if isinstance(response.data, dict) else ""
        if status == 429:
            raise RetryLater(
                retry_after(response.headers), reason=f"{method}: rate limited"
            ) from None
        raise SlackFailed(method, status, reason) from None


def retry_after(headers: dict) -> float:
    """Seconds from a response's Retry-After header (its name in any case)."""
    for name, value in (headers or {}).items():
        if name.lower() == "retry-after":
            try:
                return max(float(value if isinstance(value, str) else value[0]), 0.0)
            except (TypeError, ValueError, IndexError):
                break
    return DEFAULT_RETRY_AFTER
