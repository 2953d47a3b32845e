from chat.blocks import (
    ErrorBlock,
    GenericBlock,
    TextBlock,
    ToolCallBlock,
    ToolResultBlock,
    dump_blocks,
    parse_blocks,
)


def test_known_blocks_round_trip():
    blocks = [
        TextBlock(text="hi"),
        ToolCallBlock(id="c1", name="clock", arguments={"tz": "UTC"}),
        ErrorBlock(message="boom", retryable=True),
    ]
    assert parse_blocks(dump_blocks(blocks)) == blocks


def test_unknown_block_type_becomes_generic_with_its_text():
    [block] = parse_blocks([{"type": "hologram", "text": "beam me up", "depth": 3}])
    assert isinstance(block, GenericBlock)
    assert block.type == "hologram"
    assert block.display_text == "beam me up"


def test_malformed_known_block_never_raises():
    blocks = parse_blocks([{"type": "text"}, {"type": "text", "text": "ok", "bogus": 1}, 42, "x"])
    assert all(isinstance(block, GenericBlock) for block in blocks)
    assert [b.display_text for b in blocks][2:] == ["42", "x"]


def test_stored_non_list_is_read_as_one_block():
    [block] = parse_blocks({"type": "text", "text": "alone"})
    assert block == TextBlock(text="alone")


def test_a_tool_result_of_the_previous_shape_still_loads():
    # Stored before results named the message that replied to them.
    [block] = parse_blocks([{"type": "tool_result", "tool_call_id": "c1", "content": "ok"}])
    assert block == ToolResultBlock(tool_call_id="c1", content="ok")
    assert block.reply_message_id is None
