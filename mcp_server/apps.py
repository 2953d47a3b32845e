from django.apps import AppConfig
from django.utils.translation import gettext_lazy as _


class McpServerConfig(AppConfig):
    """Parley as an MCP server: agents outside Parley ask the user questions through it
    (streamable HTTP at /mcp/, mounted in config.asgi)."""

    name = "mcp_server"
    verbose_name = _("Agents outside Parley (MCP)")

    def ready(self) -> None:
        from accounts import settings_page
        from mcp_server.connecting import connect_context

        settings_page.add_section(
            settings_page.Section(
                name="mcp_server.connect",
                template="mcp_server/connect.html#settings",
                order=300,
                context=connect_context,
            )
        )
