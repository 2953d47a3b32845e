from django.apps import AppConfig
from django.utils.translation import gettext_lazy as _


class McpServerConfig(AppConfig):
    """Parley as an MCP server: agents outside Parley ask the user questions through it
    (streamable HTTP at /mcp/, mounted in config.asgi)."""

    name = "mcp_server"
    verbose_name = _("Agents outside Parley (MCP)")
