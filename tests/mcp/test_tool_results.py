"""What the model reads of an MCP tool's result (mcp_client.tools.result_text)."""

import mcp_types as types

from chat.engine.tools import MAX_RESULT_CHARS
from mcp_client.tools import exposed_name, result_text


def test_text_is_kept_and_other_content_is_named_not_shown():
    result = types.CallToolResult(
        content=[
            types.TextContent(type="text", text="<b>bold</b> words"),
            types.ImageContent(type="image", data="aGk=", mime_type="image/png"),
            types.ResourceLink(type="resource_link", uri="file:///notes/a.md", name="a"),
        ]
    )
    assert result_text(result).splitlines() == [
        "<b>bold</b> words",  # data for the model; the page escapes it
        "[image content (image/png), not shown]",
        "[resource link file:///notes/a.md]",
    ]


def test_a_structured_result_without_text_is_its_json():
    result = types.CallToolResult(content=[], structured_content={"count": 2, "names": ["é"]})
    assert result_text(result) == '{"count": 2, "names": ["é"]}'


def test_a_long_result_is_cut_and_says_so():
    result = types.CallToolResult(content=[types.TextContent(type="text", text="x" * 50_000)])
    text = result_text(result)
    assert len(text) <= MAX_RESULT_CHARS
    assert text.endswith(
        f"[The result was cut to {MAX_RESULT_CHARS - 100} of its 50000 characters.]"
    )


def test_a_tools_name_is_one_the_model_providers_accept():
    assert exposed_name("notes", "write_note") == "mcp__notes__write_note"
    assert exposed_name("web", "search.v2/query") == "mcp__web__search_v2_query"
    assert len(exposed_name("s", "t" * 100)) == 64
