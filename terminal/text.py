"""Server text as it may reach the terminal.

Everything the server sends is untrusted (it may come from the model): terminal control
characters (escape sequences that clear the screen, write the clipboard, hide links) and
invisible characters are dropped before anything is printed.
"""

from core.text import clean_message, clean_text


def shown(text: str) -> str:
    """A message's text: no control or invisible characters, its layout kept."""
    return clean_message(str(text))


def shown_line(text: str) -> str:
    """Short text (a title, a label, a line): no control or invisible characters, on one line."""
    return clean_text(str(text))
