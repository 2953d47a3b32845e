"""SQLite as `make run` configures it (WAL, IMMEDIATE, busy timeout) takes concurrent writers."""

import subprocess
import sys

import pytest

from tests.live_server import ROOT, LiveServer

pytestmark = pytest.mark.live

WRITERS = 4
WRITES_EACH = 40

WRITER = """
from chat.models import Conversation
from tests.factories import add_message
conversation = Conversation.objects.get()
for i in range(%d):
    add_message(conversation.pk, str(i))
"""

CHECK = """
from chat.models import Conversation
conversation = Conversation.objects.get()
orders = sorted(conversation.messages.values_list("order", flat=True))
print(conversation.seq, len(orders), orders == list(range(len(orders))))
"""


def test_concurrent_writer_processes_never_see_database_is_locked(tmp_path):
    server = LiveServer(tmp_path)
    server.set_up_database()
    server.manage(
        "shell",
        "-v",
        "0",
        "-c",
        "from chat import services; from django.contrib.auth.models import User; "
        "services.create_conversation(owner=User.objects.get(username='demo'))",
    )
    writers = [
        subprocess.Popen(
            [sys.executable, "manage.py", "shell", "-v", "0", "-c", WRITER % WRITES_EACH],
            cwd=ROOT,
            env=server.env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for _ in range(WRITERS)
    ]
    for writer in writers:
        _, stderr = writer.communicate(timeout=120)
        assert writer.returncode == 0, stderr
        assert "locked" not in stderr
    total = WRITERS * WRITES_EACH
    assert server.manage("shell", "-v", "0", "-c", CHECK).split() == [
        str(total),
        str(total),
        "True",
    ]
