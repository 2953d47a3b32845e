"""An address longer than daphne's (twisted's) 16 KB line limit is answered with 414 URI Too
Long, not a connection closed without a word: by daphne itself (config.serve), and in the
deployed topology by nginx (deploy/nginx). A header line past the limit gets 431 from daphne."""

import socket

import pytest

from tests.live_server import LiveServer, Nginx

pytestmark = pytest.mark.live

LONG_PATH = b"/c/" + b"a" * 20_000  # 20 KB


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    server = LiveServer(tmp_path_factory.mktemp("long-urls"))
    server.set_up_database()
    server.start()
    yield server
    server.stop()


def ask(port: int, request: bytes) -> bytes:
    """Send a raw request; everything the server answers until it closes."""
    with socket.create_connection(("127.0.0.1", port), timeout=10) as client:
        client.sendall(request)
        answer = b""
        while chunk := client.recv(65536):
            answer += chunk
    return answer


def test_daphne_answers_a_20_kb_address_with_414(server):
    answer = ask(server.port, b"GET " + LONG_PATH + b" HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")

    head, _, body = answer.partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 414 URI Too Long\r\n"), answer[:200]
    assert body == b"This address is too long: the limit is 16 KB.\n"
    # The connection still serves whoever comes next.
    again = ask(
        server.port, b"GET /login/ HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n"
    )
    assert again.startswith(b"HTTP/1.1 200 OK\r\n")
    assert server.process.poll() is None


def test_daphne_answers_a_20_kb_header_line_with_431(server):
    header = b"X-Long: " + b"b" * 20_000
    answer = ask(server.port, b"GET / HTTP/1.1\r\nHost: 127.0.0.1\r\n" + header + b"\r\n\r\n")

    assert answer.startswith(b"HTTP/1.1 431 Request Header Fields Too Large\r\n"), answer[:200]


def test_nginx_answers_a_20_kb_address_with_414(server, tmp_path):
    address = server.url.removeprefix("http://")
    nginx = Nginx(tmp_path / "nginx", web=[address, address], static_root=tmp_path)
    nginx.start()
    try:
        answer = ask(nginx.port, b"GET " + LONG_PATH + b" HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
    finally:
        nginx.stop()

    assert answer.startswith(b"HTTP/1.1 414 "), answer[:200]
