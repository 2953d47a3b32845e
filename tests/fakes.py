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


class WebhookReceiver:
    """A webhook endpoint on a loopback port: records every request (headers lower-cased,
    body text, the status it answered) and answers with the next of `statuses` (200 once
    they run out)."""

    def __init__(self, *statuses: int) -> None:
        import threading
        from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

        self.statuses = list(statuses)
        self.requests: list[tuple[dict[str, str], str]] = []
        self.answered: list[int] = []  # the status each request got, in the same order
        # With `body_bytes`, each answer carries that many bytes of body; `body_sent` counts
        # what the client took before it closed the connection, set once the answer ends.
        self.body_bytes = 0
        self.body_sent: list[int] = []
        # With `trickle` (seconds), the answer's status line and headers go out a byte at a
        # time, this long apart, for as long as the client listens.
        self.trickle = 0.0
        self.in_flight = 0  # requests being answered now; the most at once so far:
        self.most_in_flight = 0
        self.answer_ended = threading.Event()
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
                body = self.rfile.read(int(self.headers.get("Content-Length", 0))).decode()
                with lock:
                    receiver.requests.append(
                        ({k.lower(): v for k, v in self.headers.items()}, body)
                    )
                    status = receiver.statuses.pop(0) if receiver.statuses else 200
                    receiver.answered.append(status)
                if receiver.trickle:
                    self.trickle_answer(status)
                    return
                self.send_response(status)
                self.send_header("Content-Length", str(receiver.body_bytes))
                self.end_headers()
                sent, chunk = 0, b"x" * 65536
                try:
                    while sent < receiver.body_bytes:
                        self.wfile.write(chunk[: receiver.body_bytes - sent])
                        sent += min(len(chunk), receiver.body_bytes - sent)
                except OSError:
                    pass  # the client closed the connection
                receiver.body_sent.append(sent)
                receiver.answer_ended.set()

            def trickle_answer(self, status: int) -> None:
                import time

                try:
                    for byte in f"HTTP/1.1 {status} OK\r\nContent-Length: 0\r\n\r\n".encode():
                        self.wfile.write(bytes([byte]))
                        self.wfile.flush()
                        time.sleep(receiver.trickle)
                except OSError:
                    pass  # the client closed the connection
                self.close_connection = True
                receiver.answer_ended.set()

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


class PushService:
    """A Web Push service on a loopback port, as a browser's would be: each POST must carry a
    VAPID JWT (RFC 8292) that verifies with the key it names, which must be `vapid_public_key`
    and be meant for this origin; its body is decrypted (aes128gcm, RFC 8291, http_ece) with a
    subscription's keys made here, as a browser makes them. Records each decrypted payload
    (and the claims), and answers with the next of `statuses` (201 once they run out)."""

    def __init__(self, vapid_public_key: str, *statuses: int) -> None:
        import json
        import os
        import threading
        from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

        import http_ece
        from cryptography.hazmat.primitives import hashes, serialization
        from cryptography.hazmat.primitives.asymmetric import ec
        from cryptography.hazmat.primitives.asymmetric.utils import encode_dss_signature

        self.statuses = list(statuses)
        self.payloads: list[dict] = []
        self.claims: list[dict] = []
        self.refused: list[str] = []  # why a request was refused (401/400), if any was
        self.browser_key = ec.generate_private_key(ec.SECP256R1())
        self.auth = os.urandom(16)
        public = self.browser_key.public_key().public_bytes(
            serialization.Encoding.X962, serialization.PublicFormat.UncompressedPoint
        )
        self.keys = {"p256dh": b64url(public), "auth": b64url(self.auth)}
        service = self
        lock = threading.Lock()

        def verify(authorization: str) -> dict:
            scheme, _, params = authorization.partition(" ")
            assert scheme == "vapid", scheme
            fields = dict(part.strip().split("=", 1) for part in params.split(","))
            assert fields["k"] == vapid_public_key, "signed with another key"
            header, claims, signature = fields["t"].split(".")
            assert json.loads(b64url_decode(header)) == {"typ": "JWT", "alg": "ES256"}
            raw = b64url_decode(signature)
            key = ec.EllipticCurvePublicKey.from_encoded_point(
                ec.SECP256R1(), b64url_decode(fields["k"])
            )
            key.verify(  # raises InvalidSignature
                encode_dss_signature(
                    int.from_bytes(raw[:32], "big"), int.from_bytes(raw[32:], "big")
                ),
                f"{header}.{claims}".encode(),
                ec.ECDSA(hashes.SHA256()),
            )
            return json.loads(b64url_decode(claims))

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args) -> None:
                pass

            def do_POST(self) -> None:
                import time

                body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
                try:
                    claims = verify(self.headers.get("Authorization", ""))
                    assert claims["aud"] == service.origin
                    assert claims["exp"] > time.time()
                    assert self.headers["Content-Encoding"] == "aes128gcm"
                    assert int(self.headers["TTL"]) > 0
                    payload = json.loads(
                        http_ece.decrypt(
                            body,
                            private_key=service.browser_key,
                            auth_secret=service.auth,
                            version="aes128gcm",
                        )
                    )
                except Exception as refused:  # what a real push service refuses
                    with lock:
                        service.refused.append(f"{type(refused).__name__}: {refused}")
                    self.send_response(401)
                    self.end_headers()
                    return
                with lock:
                    service.claims.append(claims)
                    service.payloads.append(payload)
                    status = service.statuses.pop(0) if service.statuses else 201
                self.send_response(status)
                self.send_header("Content-Length", "0")
                self.end_headers()

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.origin = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.url = f"{self.origin}/push/{b64url(os.urandom(9))}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    @property
    def subscription(self) -> dict:
        """What the browser's PushSubscription.toJSON() gives."""
        return {"endpoint": self.url, "expirationTime": None, "keys": self.keys}

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()
