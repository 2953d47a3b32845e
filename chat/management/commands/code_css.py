from pathlib import Path

from django.conf import settings
from django.core.management.base import BaseCommand

from chat.markdown import CODE_CSS, code_stylesheet


class Command(BaseCommand):
    help = "Write the code highlighting colours (both themes) to static/parley-code.css."

    def handle(self, *args, **options) -> None:
        path = Path(settings.BASE_DIR) / "static" / CODE_CSS
        path.write_text(code_stylesheet(), encoding="utf-8")
        self.stdout.write(f"Wrote {path}")
