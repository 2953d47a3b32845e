"""The in-process test suite's settings (pytest-django reads this module: pyproject.toml):
Parley's own, config/settings.py, signing with a random key of this test process's.

Whatever SECRET_KEY the run was given (`SECRET_KEY=test`, or none) is replaced: nothing the
suite signs outlives it, and config/settings.py refuses a short key whenever DEBUG is off.
Processes the tests start (tests/live_server.py) run config/settings.py with keys of their
own."""

import os
import secrets

os.environ["SECRET_KEY"] = secrets.token_urlsafe(50)

from config.settings import *  # noqa: F403
