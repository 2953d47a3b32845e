from django.apps import AppConfig
from django.utils.translation import gettext_lazy as _


class McpServerConfig(AppConfig):
    """Parley as an MCP server: agents outside Parley ask the user questions through it
    (streamable HTTP at /mcp/, mounted in config.asgi)."""

    name = "mcp_server"
    verbose_name = _("Agents outside Parley (MCP)")

    def ready(self) -> None:
        from accounts import settings_page, signals
        from mcp_server import connected_apps
        from mcp_server.connecting import connect_context

        signals.signed_out_everywhere.connect(
            connected_apps.signed_out_everywhere, dispatch_uid="parley-revoke-connected-apps"
        )
        settings_page.add_link(
            settings_page.Link(
                name="mcp_server.connected_apps",
                label=_("Connected apps"),
                description=_("Apps you let ask you questions through MCP, and revoking them."),
                url_name="mcp_server:connected_apps",
                order=110,
            )
        )

        settings_page.add_section(
            settings_page.Section(
                name="mcp_server.connect",
                template="mcp_server/connect.html#settings",
                order=300,
                context=connect_context,
            )
        )
