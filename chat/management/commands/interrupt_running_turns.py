from django.core.management.base import BaseCommand

from chat.services import interrupt_running_turns


class Command(BaseCommand):
    help = (
        "Mark turns left running by a stopped server as failed (retryable). Run it before "
        "starting the only server process; `make run` does."
    )

    def handle(self, *args, **options) -> None:
        count = interrupt_running_turns()
        if count:
            self.stdout.write(f"Marked {count} interrupted turn(s) as failed; they can be retried.")
