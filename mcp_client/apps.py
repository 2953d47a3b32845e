from django.apps import AppConfig
from django.utils.translation import gettext_lazy as _


class McpClientConfig(AppConfig):
    """Tools from the operator's MCP servers (MCP_CONFIG), offered to the agent."""

    name = "mcp_client"
    verbose_name = _("Tools from MCP servers")

    def ready(self) -> None:
        from accounts import settings_page
        from chat.engine import tools
        from mcp_client import config
        from mcp_client import tools as mcp_tools
        from questions import rules

        tools.before_offering(mcp_tools.connect)
        rules.configured.add(lambda: config.load().rules, key="mcp_client.config")
        settings_page.add_link(
            settings_page.Link(
                name="mcp_client.tools",
                label=_("Tools"),
                description=_("The tools the agent can use, and which ones ask you first."),
                url_name="mcp_client:tools",
                order=300,
            )
        )
