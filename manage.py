#!/usr/bin/env python
import os
import secrets
import sys


def only_asks_for_help(argv: list[str]) -> bool:
    """Whether the command line only asks for help (`help`, `-h`, `--help` before any `--`):
    argparse prints it and exits before the command runs."""
    args = argv[1:]
    if "--" in args:
        args = args[: args.index("--")]
    return bool(args) and (args[0] == "help" or "-h" in args or "--help" in args)


if __name__ == "__main__":
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
    if only_asks_for_help(sys.argv) and not os.environ.get("SECRET_KEY"):
        # The settings refuse to load without SECRET_KEY (config/settings.py); printing a
        # command's help signs nothing, so a random key lets it load in this process only.
        os.environ["SECRET_KEY"] = secrets.token_urlsafe(50)
    from django.conf import settings
    from django.core.exceptions import ImproperlyConfigured
    from django.core.management import execute_from_command_line

    try:
        settings.INSTALLED_APPS  # noqa: B018 (loads the settings, which check SECRET_KEY)
    except ImproperlyConfigured as error:  # a setting the environment lacks: one line says it
        sys.exit(f"ImproperlyConfigured: {error}")
    execute_from_command_line(sys.argv)
