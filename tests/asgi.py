"""ASGI messages as daphne sends them, for tests that call the application directly."""


def http_scope(path: str, headers: list[tuple[bytes, bytes]] | None = None) -> dict:
    """The scope of a GET of `path` on 127.0.0.1."""
    return {
        "type": "http",
        "asgi": {"version": "3.0"},
        "http_version": "1.1",
        "method": "GET",
        "scheme": "http",
        "path": path,
        "raw_path": path.encode(),
        "query_string": b"",
        "root_path": "",
        "headers": [(b"host", b"127.0.0.1"), *(headers or [])],
        "client": ("127.0.0.1", 50000),
        "server": ("127.0.0.1", 8000),
    }
