"""Fakes shared by the tests: a model that plays canned responses, and a question."""

from chat.engine.providers.base import TextDelta, ToolCallRequest


class FakeProvider:
    """Plays canned responses: each a list of events, or an exception to raise."""

    name = "fake"

    def __init__(self, *responses):
        self.responses = list(responses)
        self.histories = []

    async def stream(self, *, history, tools):
        self.histories.append(history)
        response = self.responses.pop(0)
        if isinstance(response, Exception):
            raise response
        for event in response:
            yield event


PIZZA = {
    "header": "Pizza",
    "question": "Which pizza?",
    "options": [
        {"label": "Margherita", "description": "Tomato, mozzarella"},
        {"label": "Pepperoni"},
        {"label": "Funghi"},
    ],
}


class AskingModel(FakeProvider):
    """Asks the questions it is told to, then thanks the user with the tool result; records
    the tools offered on each request."""

    def __init__(self):
        super().__init__()
        self.tools = []

    def asks(self, tool="question", arguments=None, *, call_id="q1", also=()):
        calls = [*also, ToolCallRequest(call_id, tool, arguments or PIZZA)]
        self.responses.append(calls)
        self.responses.append(self.thanks)
        return self

    @staticmethod
    def thanks(history):
        result = history[-1].blocks[-1]
        return [TextDelta(f"Thanks: {result.content}")]

    async def stream(self, *, history, tools):
        self.histories.append(history)
        self.tools.append(tools)
        response = self.responses.pop(0) if self.responses else [TextDelta("Done.")]
        if callable(response):
            response = response(history)
        for event in response:
            yield event


class Answers:
    """How a fake HTTP server answers, shared by WebhookReceiver and PushService.

    With `body_bytes`, each answer carries that many bytes of body; `body_sent` counts what
    the client took before it closed the connection, set once the answer ends. With
    `trickle` (seconds), the answer's status line and headers go out a byte at a time, this
    long apart, for as long as the client listens. `received` is set once a request arrives;
    `answer_ended` once an answer ends (in full, or cut off by the client)."""

    def __init__(self) -> None:
        import threading

        self.body_bytes = 0
        self.body_sent: list[int] = []
        self.trickle = 0.0
        self.received = threading.Event()
        self.answer_ended = threading.Event()

    def answer(self, handler, status: int, headers: dict[str, str] | None = None) -> None:
        """Send `status` (with `headers`) on `handler`, a BaseHTTPRequestHandler."""
        if self.trickle:
            self.trickle_answer(handler, status, headers or {})
            return
        handler.send_response(status)
        for name, value in (headers or {}).items():
            handler.send_header(name, value)
        handler.send_header("Content-Length", str(self.body_bytes))
        handler.end_headers()
        sent, chunk = 0, b"x" * 65536
        try:
            while sent < self.body_bytes:
                handler.wfile.write(chunk[: self.body_bytes - sent])
                sent += min(len(chunk), self.body_bytes - sent)
        except OSError:
            pass  # the client closed the connection
        self.body_sent.append(sent)
        self.answer_ended.set()

    def trickle_answer(self, handler, status: int, headers: dict[str, str]) -> None:
        import time

        lines = [f"HTTP/1.1 {status} OK", *(f"{k}: {v}" for k, v in headers.items())]
        answer = "\r\n".join([*lines, "Content-Length: 0", "", ""]).encode()
        try:
            for byte in answer:
                handler.wfile.write(bytes([byte]))
                handler.wfile.flush()
                time.sleep(self.trickle)
        except OSError:
            pass  # the client closed the connection
        handler.close_connection = True
        self.answer_ended.set()


class WebhookReceiver(Answers):
    """A webhook endpoint on a loopback port: records every request (headers lower-cased,
    body text, the status it answered) and answers with the next of `statuses` (200 once
    they run out), as Answers says."""

    def __init__(self, *statuses: int) -> None:
        import threading
        from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

        super().__init__()
        self.statuses = list(statuses)
        self.requests: list[tuple[dict[str, str], str]] = []
        self.answered: list[int] = []  # the status each request got, in the same order
        self.in_flight = 0  # requests being answered now; the most at once so far:
        self.most_in_flight = 0
        lock = threading.Lock()
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args) -> None:
                pass

            def do_POST(self) -> None:
                with lock:
                    receiver.in_flight += 1
                    receiver.most_in_flight = max(receiver.most_in_flight, receiver.in_flight)
                try:
                    self.answer()
                finally:
                    with lock:
                        receiver.in_flight -= 1

            def answer(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
                body = body.decode(errors="replace")
                with lock:
                    receiver.requests.append(
                        ({k.lower(): v for k, v in self.headers.items()}, body)
                    )
                    status = receiver.statuses.pop(0) if receiver.statuses else 200
                    receiver.answered.append(status)
                receiver.received.set()
                receiver.answer(self, status)

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/hook"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def events(self, secret: str) -> dict[str, dict]:
        """Each event accepted (answered 2xx) once, by its webhook-id: what a deduplicating
        receiver keeps. Raises if any request's signature does not verify."""
        from standardwebhooks import Webhook

        verifier = Webhook(secret)
        return {
            headers["webhook-id"]: verifier.verify(body, headers)
            for (headers, body), status in zip(self.requests, self.answered, strict=False)
            if 200 <= status < 300
        }

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


def b64url(data: bytes) -> str:
    import base64

    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def b64url_decode(text: str) -> bytes:
    import base64

    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


# The names the local push service's certificate is valid for.
TLS_NAMES = ("127.0.0.1", "localhost", "push.example.org")


def local_tls() -> dict[str, str]:
    """A certificate authority made for this test process and a server certificate it
    signed for TLS_NAMES: the paths of "ca", "cert" and "key" (PEM). Made once a process."""
    global _local_tls
    if _local_tls:
        return _local_tls
    import ipaddress
    import tempfile
    from pathlib import Path

    from cryptography import x509
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric import ec

    ca_key, key = ec.generate_private_key(ec.SECP256R1()), ec.generate_private_key(ec.SECP256R1())
    names = [
        x509.IPAddress(ipaddress.ip_address(TLS_NAMES[0])),
        *(x509.DNSName(name) for name in TLS_NAMES[1:]),
    ]
    ca = signed_certificate("Parley test CA", ca_key, ca_key, names=None)
    cert = signed_certificate(TLS_NAMES[-1], key, ca_key, names=names)
    folder = Path(tempfile.mkdtemp(prefix="parley-tls-"))
    pem = serialization.Encoding.PEM
    (folder / "ca.pem").write_bytes(ca.public_bytes(pem))
    (folder / "cert.pem").write_bytes(cert.public_bytes(pem))
    (folder / "key.pem").write_bytes(
        key.private_bytes(pem, serialization.PrivateFormat.PKCS8, serialization.NoEncryption())
    )
    _local_tls = {name: str(folder / f"{name}.pem") for name in ("ca", "cert", "key")}
    return _local_tls


def signed_certificate(subject: str, key, ca_key, *, names):
    """A certificate for `key`, signed by the test CA's `ca_key`, valid for two days: the
    CA's own when `names` is None, else a server's for those subject alternative names."""
    import datetime

    from cryptography import x509
    from cryptography.hazmat.primitives import hashes
    from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

    def name(common: str) -> x509.Name:
        return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common)])

    ca = names is None
    now = datetime.datetime.now(datetime.UTC)
    usage = dict.fromkeys(
        ("content_commitment", "key_encipherment", "data_encipherment", "key_agreement"), False
    )
    builder = (
        x509.CertificateBuilder()
        .subject_name(name(subject))
        .issuer_name(name("Parley test CA"))
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(days=1))
        .not_valid_after(now + datetime.timedelta(days=2))
        .add_extension(x509.BasicConstraints(ca=ca, path_length=None), critical=True)
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), False)
        .add_extension(
            x509.AuthorityKeyIdentifier.from_issuer_public_key(ca_key.public_key()), False
        )
        .add_extension(
            x509.KeyUsage(
                digital_signature=True,
                key_cert_sign=ca,
                crl_sign=ca,
                encipher_only=False,
                decipher_only=False,
                **usage,
            ),
            critical=True,
        )
    )
    if not ca:
        builder = builder.add_extension(
            x509.SubjectAlternativeName(names), critical=False
        ).add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), False)
    return builder.sign(ca_key, hashes.SHA256())


_local_tls: dict[str, str] = {}


class PushService(Answers):
    """A Web Push service on a loopback port, over TLS (local_tls()), as a browser's would
    be: each POST must carry a VAPID JWT (RFC 8292) that verifies with the key it names,
    which must be `vapid_public_key` and be meant for this origin; its body is decrypted
    (aes128gcm, RFC 8291, http_ece) with a subscription's keys made here, as a browser makes
    them. Records each decrypted payload (and the claims, and the headers), counts the
    connections made to it, and answers with the next of `statuses` (201 once they run out)
    and `headers`, as Answers says."""

    def __init__(self, vapid_public_key: str, *statuses: int) -> None:
        import os
        import ssl
        import threading
        from http.server import ThreadingHTTPServer

        super().__init__()
        self.statuses = list(statuses)
        self.headers: dict[str, str] = {}
        self.payloads: list[dict] = []
        self.claims: list[dict] = []
        self.requests: list[dict[str, str]] = []  # each request's headers, lower-cased
        self.refused: list[str] = []  # why a request was refused (401/400), if any was
        self.connections = 0
        self.lock = threading.Lock()
        self.browser_key, self.keys = browser_keys()
        self.auth = b64url_decode(self.keys["auth"])
        self.vapid_public_key = vapid_public_key
        tls = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        tls.load_cert_chain(local_tls()["cert"], local_tls()["key"])
        service = self

        class Server(ThreadingHTTPServer):
            def verify_request(self, request, client_address) -> bool:
                with service.lock:
                    service.connections += 1
                return True

            def finish_request(self, request, client_address) -> None:
                # The handshake on the connection's own thread: a slow client holds only it.
                try:
                    request = tls.wrap_socket(request, server_side=True)
                except OSError:
                    return  # a client that does not trust the certificate
                super().finish_request(request, client_address)

            def handle_error(self, request, client_address) -> None:
                pass  # a client that closed the connection early

        self.server = Server(("127.0.0.1", 0), push_handler(self))
        self.origin = f"https://127.0.0.1:{self.server.server_address[1]}"
        self.url = f"{self.origin}/push/{b64url(os.urandom(9))}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    @property
    def subscription(self) -> dict:
        """What the browser's PushSubscription.toJSON() gives."""
        return {"endpoint": self.url, "expirationTime": None, "keys": self.keys}

    def verify(self, headers, body: bytes) -> dict:
        """The payload of a push, if the push service accepts it (else it raises): signed
        with the VAPID key, for this origin, unexpired, encrypted for this browser."""
        import json
        import time

        import http_ece

        claims = verify_vapid(headers.get("Authorization", ""), self.vapid_public_key)
        assert claims["aud"] == self.origin
        assert claims["exp"] > time.time()
        assert headers["Content-Encoding"] == "aes128gcm"
        assert int(headers["TTL"]) > 0
        payload = json.loads(
            http_ece.decrypt(
                body, private_key=self.browser_key, auth_secret=self.auth, version="aes128gcm"
            )
        )
        return {"claims": claims, "payload": payload}

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


def push_handler(service: PushService):
    """The request handler of `service`."""
    from http.server import BaseHTTPRequestHandler

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args) -> None:
            pass

        def do_POST(self) -> None:
            body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
            with service.lock:
                service.requests.append({k.lower(): v for k, v in self.headers.items()})
            service.received.set()
            try:
                push = service.verify(self.headers, body)
            except Exception as refused:  # what a real push service refuses
                with service.lock:
                    service.refused.append(f"{type(refused).__name__}: {refused}")
                self.send_response(401)
                self.send_header("Content-Length", "0")
                self.end_headers()
                return
            with service.lock:
                service.claims.append(push["claims"])
                service.payloads.append(push["payload"])
                status = service.statuses.pop(0) if service.statuses else 201
            service.answer(self, status, service.headers)

    return Handler


def browser_keys():
    """A browser's subscription keys: its P-256 private key, and the "p256dh" and "auth" it
    gives the server."""
    import os

    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric import ec

    key = ec.generate_private_key(ec.SECP256R1())
    public = key.public_key().public_bytes(
        serialization.Encoding.X962, serialization.PublicFormat.UncompressedPoint
    )
    return key, {"p256dh": b64url(public), "auth": b64url(os.urandom(16))}


def verify_vapid(authorization: str, vapid_public_key: str) -> dict:
    """The claims of a VAPID Authorization header (RFC 8292); raises unless it is signed with
    `vapid_public_key`."""
    import json

    from cryptography.hazmat.primitives import hashes
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.hazmat.primitives.asymmetric.utils import encode_dss_signature

    scheme, _, params = authorization.partition(" ")
    assert scheme == "vapid", scheme
    fields = dict(part.strip().split("=", 1) for part in params.split(","))
    assert fields["k"] == vapid_public_key, "signed with another key"
    header, claims, signature = fields["t"].split(".")
    assert json.loads(b64url_decode(header)) == {"typ": "JWT", "alg": "ES256"}
    raw = b64url_decode(signature)
    key = ec.EllipticCurvePublicKey.from_encoded_point(ec.SECP256R1(), b64url_decode(fields["k"]))
    key.verify(  # raises InvalidSignature
        encode_dss_signature(int.from_bytes(raw[:32], "big"), int.from_bytes(raw[32:], "big")),
        f"{header}.{claims}".encode(),
        ec.ECDSA(hashes.SHA256()),
    )
    return json.loads(b64url_decode(claims))
