"""Cleaning text from outside (people, models) before it is stored or shown.

Invisible characters can hide or reorder what a reader sees: bidi overrides, zero-width
characters, Unicode tag characters (U+E0000-E007F, used to smuggle instructions), other
format and control characters. They are dropped everywhere; the zero-width (non-)joiners are
kept because scripts such as Persian and Devanagari and emoji sequences need them. Short
text from models also loses unassigned code points; messages keep them (an emoji newer than
this Python's Unicode tables is unassigned here).
"""

import unicodedata

_DROPPED_CATEGORIES = frozenset({"Cc", "Cf", "Co", "Cs"})
_JOINERS = frozenset({"\u200c", "\u200d"})
_WHITESPACE_CONTROLS = frozenset("\t\n\r\x0b\x0c")
# The control characters that lay text out; every other one is invisible.
_LAYOUT = frozenset("\t\n\r")
_ASCII_CONTROLS = dict.fromkeys(c for c in [*range(32), 127] if chr(c) not in _LAYOUT)


def _visible(char: str, *, unassigned: bool = True) -> bool:
    if char in _JOINERS:
        return True
    if 0xE0000 <= ord(char) <= 0xE007F:
        return False
    category = unicodedata.category(char)
    return category not in _DROPPED_CATEGORIES and (unassigned or category != "Cn")


def clean_text(value: str, *, multiline: bool = False) -> str:
    """Short text (titles, labels, questions): invisible characters dropped, whitespace runs
    collapsed to one space; with `multiline`, line breaks kept and blank edges trimmed."""
    kept = []
    for char in value.replace("\r\n", "\n"):
        if char in _WHITESPACE_CONTROLS:
            kept.append("\n" if multiline and char == "\n" else " ")
        elif _visible(char, unassigned=False):
            kept.append(char)
    text = "".join(kept)
    if multiline:
        return "\n".join(" ".join(line.split()) for line in text.strip().splitlines()).strip()
    return " ".join(text.split())


def drop_invisible(value: str) -> str:
    """Text a model or a tool wrote, as Parley stores and shows it: invisible characters
    dropped, every other character kept as it came (layout, edges). A character at a time, so
    a stream's pieces can be cleaned one by one."""
    if value.isascii():
        return value.translate(_ASCII_CONTROLS)
    return "".join(c for c in value if c in _LAYOUT or _visible(c))


def clean_message(value: str) -> str:
    """A message someone wrote: invisible characters dropped, but its layout (line breaks,
    tabs, runs of spaces for code) kept; blank edges trimmed."""
    text = value.replace("\r\n", "\n").replace("\r", "\n")
    return "".join(c for c in text if c in "\t\n" or _visible(c)).strip()
