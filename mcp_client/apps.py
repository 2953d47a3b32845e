from django.apps import AppConfig
from django.utils.translation import gettext_lazy as _


class McpClientConfig(AppConfig):
    """Tools from the operator's MCP servers (MCP_CONFIG), offered to the agent."""

    name = "mcp_client"
    verbose_name = _("Tools from MCP servers")

    def ready(self) -> None:
        from chat.engine import tools
        from mcp_client import tools as mcp_tools

        tools.before_offering(mcp_tools.connect)
