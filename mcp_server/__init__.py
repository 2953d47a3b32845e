"""Parley as an MCP server at /mcp/.

Agents outside Parley ask people questions through it, with their personal API tokens.
"""
