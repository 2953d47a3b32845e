"""Whether a request comes from Slack: its signature (slack_sdk's SignatureVerifier, over
the signing secret, within Slack's 5-minute window) and not seen before (a replay of a signed
request within the window is refused: each signature is remembered in the cache for it)."""

import logging

from django.conf import settings
from django.core.cache import cache
from slack_sdk.signature import SignatureVerifier

logger = logging.getLogger("parley.slack")

# Slack's window: a request whose timestamp is further from now is refused.
WINDOW_SECONDS = 300


def is_from_slack(*, body: bytes, timestamp: str, signature: str) -> bool:
    """True once for each request Slack signed; False for an unsigned, badly signed, stale or
    replayed one."""
    secret = settings.SLACK_SIGNING_SECRET
    if not (secret and timestamp and signature):
        return False
    if not SignatureVerifier(secret).is_valid(body=body, timestamp=timestamp, signature=signature):
        return False
    # Kept past the window on both sides of now: a replay is refused as long as it is fresh.
    try:
        return cache.add(f"slackbot:seen:{signature}", timestamp, timeout=2 * WINDOW_SECONDS + 60)
    except Exception:  # a cache that cannot be reached cannot tell a replay: refused
        logger.warning("Slack request refused: the cache of seen requests is unreachable")
        return False
