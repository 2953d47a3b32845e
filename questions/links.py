"""A link a tool asks a person to open (URL elicitation), read the way their browser reads it.

The WHATWG URL standard parses it (ada, the parser in Node.js), and Parley shows the host of
that parse and links to that parse serialized again: the host shown is the host the browser
goes to. A parser of another standard disagrees on inputs built to make it
(`https://evil.example\\@bank.example/`: Python's urllib reads the host bank.example, a
browser evil.example). Internationalized hosts are shown as the browser resolves them, in
punycode (xn--), so that a look-alike of a known name does not pass for it.

Refused (no link at all): anything but http and https; credentials (`user:pass@host`, which
put a name the reader trusts before the real host); characters nobody sees (bidi controls,
zero-width and other format characters, controls, whitespace), which make the text shown
differ from what opens; more than MAX_URL_CHARS.
"""

from dataclasses import dataclass

from ada_url import URL

from core.text import drop_invisible

MAX_URL_CHARS = 2_000
_SCHEMES = frozenset({"http:", "https:"})
_JOINERS = frozenset({"\u200c", "\u200d"})  # kept by drop_invisible (scripts need them)


@dataclass(frozen=True)
class Link:
    href: str  # the URL as parsed and serialized again: what the browser opens
    host: str  # the host the browser goes to (punycode for an IDN), with a port if not default


def safe_link(url: str) -> Link | None:
    """The link to show and open for `url`, or None when it must not be shown (see above)."""
    url = url.strip()
    if (
        drop_invisible(url) != url
        or any(char in _JOINERS or char.isspace() for char in url)
        or len(url) > MAX_URL_CHARS
    ):
        return None
    try:
        parsed = URL(url)
    except ValueError:
        return None
    if parsed.protocol not in _SCHEMES or parsed.username or parsed.password or not parsed.host:
        return None
    if len(parsed.href) > MAX_URL_CHARS:
        return None
    return Link(href=parsed.href, host=parsed.host)
