"""Request ids on responses and log lines, and the JSON log format."""

import io
import json
import logging
import re
import secrets
import subprocess
import sys
from pathlib import Path

import pytest
from django.db import OperationalError

from config import health
from config.logging import JsonFormatter, current_request_id
from tests.live_server import run_isolated

ROOT = Path(__file__).resolve().parent.parent
GENERATED = re.compile(r"[0-9a-f]{32}")


@pytest.fixture
def console():
    """What the configured console handler writes (settings.LOGGING), as it writes it."""
    handler = next(h for h in logging.getLogger().handlers if h.get_name() == "console")
    output = io.StringIO()
    previous = handler.setStream(output)
    yield output
    handler.setStream(previous)


def test_a_well_formed_request_id_from_the_proxy_is_kept(client):
    response = client.get("/login/", headers={"x-request-id": "6f1c2a9e-proxy:42"})

    assert response["X-Request-ID"] == "6f1c2a9e-proxy:42"


@pytest.mark.parametrize(
    "proposed", ["", "two words", "forged\nWARNING line", "x" * 129, "-leading-dash", "ça"]
)
def test_a_missing_or_malformed_request_id_is_replaced(client, proposed):
    headers = {"x-request-id": proposed} if proposed else {}

    first = client.get("/login/", headers=headers)["X-Request-ID"]
    second = client.get("/login/", headers=headers)["X-Request-ID"]

    assert GENERATED.fullmatch(first)
    assert first != second


def test_log_lines_written_while_handling_a_request_carry_its_id(client, console):
    # Django writes "Not Found" once the response has left the middleware.
    client.get("/no-such-page/", headers={"x-request-id": "req-404"})

    assert "WARNING django.request [req-404] Not Found: /no-such-page/" in console.getvalue()
    assert current_request_id.get() is None  # nothing leaks past the request


def test_the_views_lines_and_djangos_response_line_carry_the_id(client, console, monkeypatch):
    async def refused():
        raise OperationalError("connection refused")

    monkeypatch.setattr(health, "database_answers", refused)

    response = client.get("/healthz", headers={"x-request-id": "req-503"})

    assert response.status_code == 503
    lines = console.getvalue().splitlines()
    # The view's line, written inside the middleware, and Django's, written after it returned.
    assert any(
        "WARNING parley.health [req-503] health check: the database" in line for line in lines
    )
    assert any(
        "ERROR django.request [req-503] Service Unavailable: /healthz" in line for line in lines
    )


def test_lines_outside_any_request_say_so(console):
    logging.getLogger("parley.test").warning("sweeping")

    assert "WARNING parley.test [-] sweeping" in console.getvalue()


def test_the_json_format_writes_one_object_per_line_with_the_extra_fields():
    logger = logging.getLogger("parley.test")
    try:
        raise ConnectionResetError("the provider hung up")
    except ConnectionResetError:
        record = logger.makeRecord(
            "parley.test",
            logging.ERROR,
            __file__,
            1,
            "turn of conversation %s failed:\n%s",
            (7, "第一行"),
            sys.exc_info(),
            extra={"conversation_id": 7, "request_id": "req-1", "odd": object()},
        )

    line = JsonFormatter().format(record)

    assert "\n" not in line
    entry = json.loads(line)
    assert entry["level"] == "ERROR"
    assert entry["logger"] == "parley.test"
    assert entry["message"] == "turn of conversation 7 failed:\n第一行"
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}\+00:00", entry["time"])
    assert entry["conversation_id"] == 7
    assert entry["request_id"] == "req-1"
    assert entry["odd"].startswith("<object object")
    assert "ConnectionResetError: the provider hung up" in entry["exception"]


def test_log_format_json_makes_every_line_a_json_object(tmp_path):
    result = manage(["shell", "-c", SAY_HELLO], tmp_path, LOG_FORMAT="json", DEBUG="true")

    assert result.returncode == 0, result.stderr
    entries = [json.loads(line) for line in result.stderr.splitlines()]
    assert [(entry["message"], entry["request_id"]) for entry in entries] == [
        ("hi there", "-"),
        ("Not Found: /no-such-page/", "req-json"),  # once, though DEBUG is on
    ]
    assert entries[0]["answer"] == 42
    assert entries[1]["status_code"] == 404


def test_an_unknown_log_format_stops_the_process(tmp_path):
    result = manage(["check"], tmp_path, LOG_FORMAT="xml")

    assert result.returncode != 0
    assert "LOG_FORMAT must be text or json, not 'xml'" in result.stderr


SAY_HELLO = """
import logging
from django.test import Client

logging.getLogger("parley.x").info("hi %s", "there", extra={"answer": 42})
Client().get("/no-such-page/", headers={"host": "127.0.0.1", "x-request-id": "req-json"})
"""


def manage(args: list[str], tmp_path: Path, **env: str) -> subprocess.CompletedProcess:
    """`manage.py *args` with only these settings in the environment."""
    key = secrets.token_urlsafe(50)
    return run_isolated(["manage.py", *args], tmp_path, timeout=60, SECRET_KEY=key, **env)
