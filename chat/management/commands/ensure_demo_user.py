from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand

DEMO_USERNAME = "demo"
DEMO_PASSWORD = "demo"  # noqa: S105 - the documented demo account of `make run`


class Command(BaseCommand):
    help = "Create the demo account (demo / demo) unless it exists. For development servers."

    def handle(self, *args, **options) -> None:
        user_model = get_user_model()
        user, created = user_model.objects.get_or_create(username=DEMO_USERNAME)
        if created:
            user.set_password(DEMO_PASSWORD)
            user.save(update_fields=["password"])
            self.stdout.write(f"Created the demo user: {DEMO_USERNAME} / {DEMO_PASSWORD}")
        elif user.check_password(DEMO_PASSWORD):
            self.stdout.write(f"Demo user: {DEMO_USERNAME} / {DEMO_PASSWORD}")
        else:
            self.stdout.write(f"Demo user: {DEMO_USERNAME} (its password was changed)")
