"""The one way the outbox makes an HTTP request, a webhook's or a channel's (a Web Push):
the URL read by one parser for its check and its request (webhooks.addresses.parse_url),
the connection made to the address the check returned, no redirect followed, nothing of the
answer read but its status, and the whole attempt, from the address lookup to the status
line, ended at WEBHOOK_TIMEOUT."""

import asyncio
import functools
import ssl
from collections.abc import Callable
from dataclasses import dataclass

import httpx
from django.conf import settings

from webhooks.addresses import check_url, parse_url


@dataclass(frozen=True)
class Post:
    """A POST of the outbox, ready to send."""

    url: str
    content: bytes
    headers: dict[str, str]
    # Raises UnsafeUrl unless `url` may be sent to; returns the address to connect to. Runs
    # at every attempt, on a thread (it looks the host up).
    check: Callable[[str], str] = check_url


@functools.cache
def tls() -> ssl.SSLContext:
    """Every request's TLS: httpx's defaults (certifi's authorities, the certificate checked
    for the URL's host), made once for the process rather than once a request."""
    return httpx.create_ssl_context(trust_env=False)


async def send(post: Post) -> int:
    """POST and return the receiver's status, all within WEBHOOK_TIMEOUT (else TimeoutError):
    httpx's timeouts bound each read, and a receiver that trickles its answer a byte at a
    time would otherwise hold the attempt (and the sweep's thread) for as long as it likes.
    Raises UnsafeUrl, httpx.HTTPError or httpx.InvalidURL."""
    url = parse_url(post.url)
    async with asyncio.timeout(settings.WEBHOOK_TIMEOUT):
        # Connect to the address just checked, not to whatever a second lookup returns (DNS
        # rebinding); the request still names the host, for virtual hosting and TLS.
        address = await asyncio.to_thread(post.check, post.url)
        async with (
            httpx.AsyncClient(
                timeout=settings.WEBHOOK_TIMEOUT,
                follow_redirects=False,
                trust_env=False,
                verify=tls(),
            ) as client,
            # Streamed, and closed with the body unread: the status is all a delivery needs,
            # and a receiver's answer, however large, costs no memory here.
            client.stream(
                "POST",
                url.copy_with(host=address),
                content=post.content,
                headers={**post.headers, "host": url.netloc.decode("ascii")},
                extensions={"sni_hostname": url.raw_host.decode("ascii")},
            ) as response,
        ):
            return response.status_code
