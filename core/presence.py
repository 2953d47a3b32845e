"""Whether a user has one of Parley's pages open, as every process can tell.

Every signed-in page holds the user's live channel (questions.consumers), which marks the
user present on connect and again every PRESENCE_REFRESH_SECONDS while it stays open, as a
key in Django's cache that lives PRESENCE_SECONDS: Redis when REDIS_URL is set, so every
process sees every other's pages; else this one process's memory, where every page's socket
is too. A page closed leaves its mark until it lapses (a socket cannot tell whether the user
has another page open on another process): so a user counts as present until at most
PRESENCE_SECONDS after their last page closed, and as absent at most that long after a
process that held their page died.
"""

from django.core.cache import cache

PRESENCE_SECONDS = 45
PRESENCE_REFRESH_SECONDS = 15


def _key(user_id: int) -> str:
    return f"parley:presence:{user_id}"


async def mark_present(user_id: int) -> None:
    await cache.aset(_key(user_id), 1, timeout=PRESENCE_SECONDS)


def open_pages_of(user_ids: list[int]) -> set[int]:
    """Which of these users count as present (one round trip)."""
    found = cache.get_many([_key(user_id) for user_id in user_ids])
    return {user_id for user_id in user_ids if _key(user_id) in found}
