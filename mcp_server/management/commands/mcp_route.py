"""`manage.py mcp_route ADDRESS…`: the route that starts the MCP session ids of the web process
serving at each ADDRESS ("host:port", as it is bound), one a line, for nginx's configuration
(docs/operators/deploying.md). It depends on SECRET_KEY: run it with the processes' settings."""

from django.core.management.base import BaseCommand

from mcp_server.asgi import route


class Command(BaseCommand):
    help = "Print the MCP session route of the web process at each host:port, for nginx."

    def add_arguments(self, parser) -> None:
        parser.add_argument("addresses", nargs="+", metavar="ADDRESS")

    def handle(self, *args, addresses: list[str], **options) -> None:
        for address in addresses:
            self.stdout.write(route(address))
