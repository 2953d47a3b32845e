"""Log lines an operator can use: the id of the request being handled on every record, and an
optional JSON format (`LOG_FORMAT=json`), one object per line. Installed by `LOGGING`."""

import json
import logging
from contextvars import ContextVar
from datetime import UTC, datetime

# The id of the request this context is handling (set by config.middleware.request_id_middleware).
current_request_id: ContextVar[str | None] = ContextVar("current_request_id", default=None)

# Attributes every LogRecord has; anything else on a record came from `extra=`.
_RECORD_ATTRIBUTES = frozenset(
    {
        *logging.LogRecord("", logging.INFO, "", 0, "", (), None).__dict__,
        "message",
        "asctime",
        "taskName",
    }
)


class RequestIdFilter(logging.Filter):
    """Set `record.request_id`: the request being handled, or "-" outside any request.

    Django logs a 4xx/5xx response after the middleware has returned, so a record that carries
    the request (`extra={"request": ...}`) gives its id too.
    """

    def filter(self, record: logging.LogRecord) -> bool:
        request_id = current_request_id.get()
        if request_id is None:
            request_id = getattr(getattr(record, "request", None), "request_id", None)
        record.request_id = request_id or "-"
        return True


class JsonFormatter(logging.Formatter):
    """One JSON object per line: time (UTC, ISO 8601), level, logger, message, every `extra`
    field, and the traceback as `exception` when there is one."""

    def format(self, record: logging.LogRecord) -> str:
        payload = {
            "time": datetime.fromtimestamp(record.created, UTC).isoformat(timespec="milliseconds"),
            "level": record.levelname,
            "logger": record.name,
            "message": record.getMessage(),
        }
        for key, value in record.__dict__.items():
            if key not in _RECORD_ATTRIBUTES and key not in payload:
                payload[key] = value
        if record.exc_info:
            payload["exception"] = self.formatException(record.exc_info)
        if record.stack_info:
            payload["stack"] = self.formatStack(record.stack_info)
        try:
            return json.dumps(payload, default=str)
        except ValueError:  # a circular structure in an extra: keep the line, lose the detail
            return json.dumps({key: str(value) for key, value in payload.items()})
