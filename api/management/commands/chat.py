"""`python manage.py chat`: the terminal client (`terminal/`), started from the command line.

The options are read here; the client itself is the `terminal` package.
"""

import os

from django.core.management.base import BaseCommand, CommandError

from terminal.render import Screen
from terminal.start import run

DEFAULT_SERVER = "http://127.0.0.1:8000"


class Command(BaseCommand):
    help = (
        "Chat with a Parley server from the terminal, through its JSON API and a token. "
        "Without --conversation, --new or --list: continue the most recent conversation (a "
        "new one when there is none)."
    )
    # Django's own options change nothing in a client of a remote server: left out of --help.
    suppressed_base_arguments = {
        "--version", "--verbosity", "--settings", "--pythonpath", "--traceback", "--no-color",
        "--force-color",
    }  # fmt: skip
    # The local project's system checks say nothing about the server it talks to.
    requires_system_checks = []

    def add_arguments(self, parser):
        # Each help says its default and the variables it reads; the token's value is never
        # shown (help output ends up in scrollback and logs).
        parser.add_argument(
            "--server",
            default=os.environ.get("PARLEY_SERVER", DEFAULT_SERVER),
            help=f"The Parley server's address. Default: $PARLEY_SERVER, else {DEFAULT_SERVER}.",
        )
        parser.add_argument(
            "--token",
            default=os.environ.get("PARLEY_TOKEN", ""),
            help="An API token (Settings → API tokens, or `manage.py create_api_token USERNAME`). "
            "Default: $PARLEY_TOKEN; one of the two is needed.",
        )
        which = parser.add_mutually_exclusive_group()
        which.add_argument(
            "--conversation",
            type=int,
            metavar="ID",
            help="Continue the conversation with this id. Default: the most recent one. "
            "No environment variable.",
        )
        which.add_argument(
            "--new",
            action="store_true",
            help="Start a new conversation. Default: off. No environment variable.",
        )
        which.add_argument(
            "--list",
            action="store_true",
            help="List your conversations (* = a question waits) and exit. Default: off. "
            "No environment variable.",
        )
        parser.add_argument(
            "--title",
            default="",
            help="The new conversation's title (with --new, or when there is none yet). "
            "Default: none (the server names it after the first message). No environment variable.",
        )

    def handle(self, *args, **options) -> None:
        if not options["token"]:
            raise CommandError(
                "A token is needed: --token or PARLEY_TOKEN (create one on the API tokens page "
                "or with `manage.py create_api_token USERNAME`)."
            )
        run(
            Screen.of(self.stdout, self.stderr),
            server=options["server"],
            token=options["token"],
            conversation=options["conversation"],
            new=options["new"],
            list_only=options["list"],
            title=options["title"],
        )
