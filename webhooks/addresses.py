"""Server-side request forgery: a webhook may only reach public addresses, unless
WEBHOOK_ALLOW_PRIVATE_NETWORKS is set. Checked when a URL is registered and again before
every delivery (a name may resolve elsewhere later). A URL is read by one parser, httpx's,
for its check and for its request (webhooks.sending): two parsers may read two hosts in one
URL (`https://127.0.0.1\\@8.8.8.8/`)."""

import ipaddress
import socket

import httpx
from django.conf import settings
from django.utils.translation import gettext_lazy as _

from core.errors import ParleyError


class UnsafeUrl(ParleyError):
    status = 422
    default_message = _("Enter a full URL starting with https:// or http://.")


NOT_PUBLIC = _(
    "That URL points to a loopback, private or reserved network address; webhooks can only "
    "go to public addresses."
)
UNRESOLVED = _("The host name of that URL could not be resolved.")
BAD_URL = UnsafeUrl.default_message


def parse_url(url: str) -> httpx.URL:
    """`url` as the outbox's requests read it. Raises UnsafeUrl unless it is an http(s) URL
    with a host and a valid port."""
    try:
        parsed = httpx.URL(url)
    except (httpx.InvalidURL, ValueError):
        raise UnsafeUrl(BAD_URL) from None
    if parsed.scheme not in ("http", "https") or not parsed.host:
        raise UnsafeUrl(BAD_URL)
    if parsed.port is not None and not 0 < parsed.port < 65536:
        raise UnsafeUrl(BAD_URL)
    return parsed


def check_url(url: str) -> str:
    """Raise UnsafeUrl unless `url` is an http(s) URL whose host resolves only to public
    addresses (any address, with WEBHOOK_ALLOW_PRIVATE_NETWORKS). Returns the address that
    was checked, for the caller to connect to (a second lookup might answer otherwise)."""
    parsed = parse_url(url)
    try:
        found = socket.getaddrinfo(
            parsed.raw_host.decode("ascii"),
            parsed.port or (443 if parsed.scheme == "https" else 80),
            0,
            socket.SOCK_STREAM,
        )
    except (OSError, UnicodeError):
        raise UnsafeUrl(UNRESOLVED) from None
    if not settings.WEBHOOK_ALLOW_PRIVATE_NETWORKS:
        for _family, _type, _proto, _name, sockaddr in found:
            if not is_public(sockaddr[0]):
                raise UnsafeUrl(NOT_PUBLIC)
    return found[0][4][0]


# IPv6 prefixes whose last 32 bits are an IPv4 address that a packet sent there reaches.
ENDS_IN_IPV4 = [
    ipaddress.IPv6Network("::ffff:0:0/96"),  # IPv4-mapped
    ipaddress.IPv6Network("::ffff:0:0:0/96"),  # IPv4-translated (RFC 2765)
    ipaddress.IPv6Network("::/96"),  # IPv4-compatible (deprecated, RFC 4291)
    ipaddress.IPv6Network("64:ff9b::/96"),  # NAT64, the well-known prefix (RFC 6052)
]
# Never public, whatever follows the prefix.
NEVER_PUBLIC = [
    ipaddress.IPv6Network("fec0::/10"),  # site-local (deprecated, RFC 3879)
    ipaddress.IPv6Network("64:ff9b:1::/48"),  # NAT64 for local use (RFC 8215)
]


def is_public(address: str) -> bool:
    """Whether `address` (as getaddrinfo gives it; IPv6 maybe with a `%zone`) is a public
    unicast address, and so is every IPv4 address that it leads to."""
    try:
        ip = ipaddress.ip_address(address.split("%", 1)[0])
    except ValueError:
        return False
    if isinstance(ip, ipaddress.IPv4Address):
        return ip.is_global and not ip.is_multicast
    if any(ip in network for network in NEVER_PUBLIC):
        return False
    carried = carried_ipv4(ip)
    if not all(is_public(str(each)) for each in carried):
        return False
    if carried and ip.teredo is None:
        # As public as the IPv4 address it leads to: Python's tables disagree from one
        # version to the next on whether 6to4 and NAT64 addresses are global.
        return True
    # Teredo, even between public ends, stays with Python's table (2001::/23 is not global).
    return ip.is_global and not ip.is_multicast


def carried_ipv4(ip: ipaddress.IPv6Address) -> list[ipaddress.IPv4Address]:
    """The IPv4 addresses that a packet sent to `ip` goes to on its way: Teredo's server and
    client, 6to4's router, or the last 32 bits of the prefixes of ENDS_IN_IPV4."""
    if ip.teredo is not None:
        return list(ip.teredo)
    if ip.sixtofour is not None:
        return [ip.sixtofour]
    if any(ip in network for network in ENDS_IN_IPV4):
        return [ipaddress.IPv4Address(int(ip) & 0xFFFFFFFF)]
    return []
