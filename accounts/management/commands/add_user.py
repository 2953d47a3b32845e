"""`manage.py add_user USERNAME` (or `make user NAME=USERNAME`): a teammate's account, without
the admin. Asks for the password twice, as `createsuperuser` does; the account is not staff."""

import getpass

from django.conf import settings
from django.core.exceptions import ValidationError
from django.core.management.base import BaseCommand, CommandError
from django.urls import reverse

from accounts import services


class Command(BaseCommand):
    help = "Add a user who can sign in to Parley (not staff). Asks for their password."

    def add_arguments(self, parser) -> None:
        parser.add_argument("username")

    def handle(self, *args, username: str, **options) -> None:
        password = getpass.getpass("Password: ")
        again = getpass.getpass("Password (again): ")
        try:
            user = services.add_user(username=username, password=password, password_again=again)
        except ValidationError as invalid:
            raise CommandError(" ".join(invalid.messages)) from None
        login = settings.PUBLIC_URL + reverse("login")
        self.stdout.write(f"Added {user.username}. They sign in at {login}")
