"""docs/developers/decisions/0001-daphne-server-class.md: what config.serve relies on in
daphne, which daphne does not document. Each check names the part that changed."""

import inspect

from daphne.cli import CommandLineInterface
from daphne.http_protocol import HTTPFactory
from daphne.server import Server

from config.serve import ParleyCommandLine, ParleyServer


def test_the_cli_builds_its_server_from_server_class():
    assert "self.server_class(" in inspect.getsource(CommandLineInterface.run), (
        "daphne's CLI no longer builds its server from server_class: config.serve's server "
        "(runner start, SIGTERM handover) would not be used"
    )
    assert ParleyCommandLine.server_class is ParleyServer


def test_run_makes_the_factories_and_the_connections_before_the_reactor_runs():
    source = inspect.getsource(Server.run)
    for part in (
        "self.connections = {}",
        "self.ws_factory = ",
        "self.http_factory = HTTPFactory(",
        "listen(self.http_factory)",
        "reactor.run(",
    ):
        assert part in source, f"daphne's Server.run changed: no {part!r}"
    for factory in ("self.ws_factory = ", "self.http_factory = "):
        assert source.index(factory) < source.index("reactor.run("), (
            f"daphne's Server.run makes {factory.split()[0]} after the reactor runs"
        )


def test_the_http_factory_builds_what_its_protocol_makes():
    source = inspect.getsource(HTTPFactory.buildProtocol)
    assert "http.HTTPFactory.buildProtocol(self, addr)" in source, (
        "daphne's HTTPFactory no longer builds its protocol through twisted's Factory "
        "(self.protocol()): config.serve's ParleyHTTPChannel would not be used"
    )


def test_open_applications_are_killed_before_shutdown_by_kill_all_applications():
    source = inspect.getsource(Server.run)
    assert 'addSystemEventTrigger("before", "shutdown", self.kill_all_applications)' in source, (
        "daphne no longer kills its applications through kill_all_applications before "
        "shutdown: open streams would not get to answer first"
    )
    assert list(inspect.signature(Server.kill_all_applications).parameters) == ["self"]
    assert "application_instance" in inspect.getsource(Server.kill_all_applications), (
        "daphne's connections no longer hold their application instance"
    )
