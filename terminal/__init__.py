"""The terminal client: talk to a Parley server from a terminal, through its JSON API and its
event stream, under a personal token (`python manage.py chat`, docs/integrators/terminal.md).

It is a client of the API over HTTP, as any other: it imports no Django app, only the cleaning
of text from `core`. `api/management/commands/chat.py` reads the options and calls
`terminal.start.run`.

A conversation opens on its newest messages (at most 20, after a line saying that earlier ones
are not shown when there are some): a long transcript is never printed whole.

Replies stream in, rendered as markdown (rich) in a terminal; tool calls and their results
show as they happen. A question is asked in the terminal: arrow keys and Enter for one
choice, Space to tick several, "Other…" for a typed answer, y/N for a confirmation; Ctrl+C
rejects it. Without a terminal (a pipe), text is printed plain and questions are numbered;
a reply that does not fit is asked again.

A tool call that needs approval shows the tool, its server and its arguments, then Allow,
Always allow, Deny (with optional feedback) or Edit arguments, chosen with the arrow keys and
Enter only (no key alone allows; keys typed ahead are dropped first); in a pipe, the word is
typed. A running tool's request for values (an elicitation) asks each field by its type, then
Submit, Decline or Cancel.

Everything the server sends is shown as text: terminal control characters (escape sequences
that clear the screen, write the clipboard, hide links) and invisible characters are dropped
before anything is printed, and links are printed with their address.
"""
