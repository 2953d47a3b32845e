"""Tools from the operator's MCP servers, offered to the agent."""
