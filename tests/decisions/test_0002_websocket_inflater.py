"""docs/developers/decisions/0002-websocket-inflater.md: what config.serve's websocket protocol
relies on in autobahn and daphne. Each check names the part that changed."""

import inspect
import zlib

from autobahn.websocket.compress_deflate import PerMessageDeflate
from autobahn.websocket.protocol import WebSocketProtocol as AutobahnProtocol
from daphne.server import Server
from daphne.ws_protocol import WebSocketFactory

from config.serve import ParleyServer, ParleyWebSocketProtocol


def test_autobahn_keeps_the_extension_and_its_inflater_under_these_names():
    assert "self._perMessageCompress" in inspect.getsource(AutobahnProtocol), (
        "autobahn no longer keeps a socket's permessage-deflate as _perMessageCompress"
    )
    deflate = PerMessageDeflate(
        is_server=True,
        server_no_context_takeover=False,
        client_no_context_takeover=True,
        server_max_window_bits=10,
        client_max_window_bits=9,
        mem_level=1,
    )
    assert deflate._decompressor is None, "autobahn renamed PerMessageDeflate._decompressor"
    message = zlib.compressobj(wbits=-9)
    data = message.compress(b'{"type": "sync", "after": 0}') + message.flush(zlib.Z_SYNC_FLUSH)
    for _ in range(2):  # the second message finds no inflater kept, as after the override
        deflate.start_decompress_message()
        assert deflate.decompress_message_data(data[:-4]) == b'{"type": "sync", "after": 0}'
        deflate.end_decompress_message()
        assert deflate._decompressor is not None, "autobahn no longer keeps the inflater there"
        deflate._decompressor = None


def test_daphne_builds_its_sockets_from_the_factorys_protocol():
    assert issubclass(ParleyWebSocketProtocol, WebSocketFactory.protocol), (
        "daphne's websocket factory no longer builds daphne's WebSocketProtocol"
    )
    assert "factory.protocol = ParleyWebSocketProtocol" in inspect.getsource(ParleyServer.run)
    assert "self.ws_factory = " in inspect.getsource(Server.run)
