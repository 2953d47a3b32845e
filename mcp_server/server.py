"""The MCP server (the SDK's low-level Server): its name, what it tells a client about itself,
and its two tools (mcp_server.tools)."""

from mcp.server import Server

from mcp_server import tools

INSTRUCTIONS = (
    "Parley is the user's question inbox. When you need a decision or information from the "
    "user, ask with ask_user_question (1-4 questions with options) or confirm_action (before "
    "anything destructive or hard to undo). The user answers in Parley, in their own time; "
    "the call returns their answer."
)


def make_server() -> Server:
    return Server(
        "parley",
        title="Parley",
        version="1",
        instructions=INSTRUCTIONS,
        on_list_tools=tools.list_tools,
        on_call_tool=tools.call_tool,
    )
