"""Server-side request forgery: a webhook may only reach public addresses, unless
WEBHOOK_ALLOW_PRIVATE_NETWORKS is set. Checked when a URL is registered and again before
every delivery (a name may resolve elsewhere later)."""

import ipaddress
import socket
from urllib.parse import urlsplit

from django.conf import settings
from django.utils.translation import gettext_lazy as _

from chat.errors import ParleyError


class UnsafeUrl(ParleyError):
    status = 422
    default_message = _("Enter a full URL starting with https:// or http://.")


NOT_PUBLIC = _(
    "That URL points to a loopback, private or reserved network address; webhooks can only "
    "go to public addresses."
)
UNRESOLVED = _("The host name of that URL could not be resolved.")
BAD_URL = UnsafeUrl.default_message


def check_url(url: str) -> str:
    """Raise UnsafeUrl unless `url` is an http(s) URL whose host resolves only to public
    addresses (any address, with WEBHOOK_ALLOW_PRIVATE_NETWORKS). Returns the address that
    was checked, for the caller to connect to (a second lookup might answer otherwise)."""
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError:
        raise UnsafeUrl(BAD_URL) from None
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise UnsafeUrl(BAD_URL)
    try:
        found = socket.getaddrinfo(
            parts.hostname, port or (443 if parts.scheme == "https" else 80), 0, socket.SOCK_STREAM
        )
    except (OSError, UnicodeError):
        raise UnsafeUrl(UNRESOLVED) from None
    if not settings.WEBHOOK_ALLOW_PRIVATE_NETWORKS:
        for _family, _type, _proto, _name, sockaddr in found:
            if not is_public(sockaddr[0]):
                raise UnsafeUrl(NOT_PUBLIC)
    return found[0][4][0]


def is_public(address: str) -> bool:
    ip = ipaddress.ip_address(address.split("%", 1)[0])
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
        ip = ip.ipv4_mapped
    return ip.is_global and not ip.is_multicast
