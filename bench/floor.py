"""The floor: the least a server can do for "click an option -> the follow-up is shown".

One page with one button. The click sends one websocket frame; the server commits one row to
SQLite (WAL, synchronous=NORMAL, as Parley's SQLite) and sends one frame back with the
follow-up text, which the page appends. Plain asyncio and the standard library, no framework.
"""

import asyncio
import base64
import hashlib
import sqlite3
import struct
import threading
from pathlib import Path

GUID = b"258EAFA5-E914-47DA-95CA-C5AB0DC85B11"

PAGE = b"""<!doctype html><html><head><meta charset="utf-8"><title>Floor</title></head><body>
<button id="option">Alpha</button><ol id="transcript"></ol>
<script>
var ws = new WebSocket("ws://" + location.host + "/ws");
document.getElementById("option").addEventListener("click", function () { ws.send("Alpha"); });
ws.onmessage = function (event) {
  var li = document.createElement("li"); li.textContent = event.data;
  document.getElementById("transcript").appendChild(li);
};
</script></body></html>"""


class Floor:
    def __init__(self, workdir: Path) -> None:
        self.db = sqlite3.connect(workdir / "floor.sqlite3", check_same_thread=False)
        self.db.execute("PRAGMA journal_mode=WAL")
        self.db.execute("PRAGMA synchronous=NORMAL")
        self.db.execute("CREATE TABLE IF NOT EXISTS answer (id INTEGER PRIMARY KEY, text TEXT)")
        self.loop = asyncio.new_event_loop()
        self.ready = threading.Event()
        threading.Thread(target=self.serve, daemon=True).start()
        self.ready.wait(10)
        self.url = f"http://127.0.0.1:{self.port}"

    def serve(self) -> None:
        asyncio.set_event_loop(self.loop)
        server = self.loop.run_until_complete(asyncio.start_server(self.handle, "127.0.0.1", 0))
        self.port = server.sockets[0].getsockname()[1]
        self.ready.set()
        self.loop.run_forever()

    def close(self) -> None:
        self.loop.call_soon_threadsafe(self.loop.stop)

    async def handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        head = (await reader.readuntil(b"\r\n\r\n")).decode("latin-1")
        headers = {
            line.split(":", 1)[0].strip().lower(): line.split(":", 1)[1].strip()
            for line in head.split("\r\n")[1:]
            if ":" in line
        }
        if "sec-websocket-key" not in headers:
            writer.write(
                b"HTTP/1.1 200 OK\r\nContent-Type: text/html\r\nConnection: close\r\n"
                + f"Content-Length: {len(PAGE)}\r\n\r\n".encode()
                + PAGE
            )
            await writer.drain()
            writer.close()
            return
        key = headers["sec-websocket-key"].encode()
        accept = base64.b64encode(hashlib.sha1(key + GUID).digest())  # noqa: S324 (RFC 6455)
        writer.write(
            b"HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
            b"Sec-WebSocket-Accept: " + accept + b"\r\n\r\n"
        )
        try:
            while True:
                first, second = await reader.readexactly(2)
                length = second & 0x7F
                if length == 126:
                    (length,) = struct.unpack("!H", await reader.readexactly(2))
                elif length == 127:
                    (length,) = struct.unpack("!Q", await reader.readexactly(8))
                mask = await reader.readexactly(4)
                data = bytes(
                    b ^ mask[i % 4] for i, b in enumerate(await reader.readexactly(length))
                )
                if first & 0x0F == 0x8:
                    return
                text = data.decode()
                self.db.execute("INSERT INTO answer (text) VALUES (?)", (text,))
                self.db.commit()
                reply = f"Onward: carrying on with {text}.".encode()
                writer.write(bytes([0x81, len(reply)]) + reply)
                await writer.drain()
        except (asyncio.IncompleteReadError, ConnectionError):
            return
        finally:
            writer.close()
