from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandError

from api.tokens import create_token


class Command(BaseCommand):
    help = "Create a personal API token for USERNAME and print it (it is shown only once)."

    def add_arguments(self, parser):
        parser.add_argument("username")
        parser.add_argument("--name", default="Command line", help="A name to recognise it by.")

    def handle(self, *args, **options) -> None:
        try:
            user = get_user_model().objects.get(username=options["username"])
        except get_user_model().DoesNotExist:
            raise CommandError(f"No user named {options['username']!r}.") from None
        _, token = create_token(user=user, name=options["name"])
        self.stdout.write(token)
