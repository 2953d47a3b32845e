"""The tools the agent may call (chat.engine.tools, chat.engine.builtin): what the model gets
back from each call, and what it is told about each tool."""

import pytest

from chat.blocks import ToolCallBlock
from chat.engine import tools
from chat.engine.tools import FunctionTool, ToolContext, ToolInput
from chat.engine.turns import Lease

CONTEXT = ToolContext(lease=Lease(conversation_id=1, token=1))
SUBAGENT = ToolContext(lease=Lease(conversation_id=2, token=1), is_subagent=True)


async def run(name, context=CONTEXT, **arguments):
    return await tools.run(ToolCallBlock(id="c", name=name, arguments=arguments), context)


@pytest.mark.parametrize(
    ("expression", "expected"),
    [
        ("6 * 7", "42"),
        ("(2 + 3) * 4 / 5", "4"),
        ("2 ** 10", "1024"),
        ("7 / 2", "3.5"),
        ("-3 % 5", "2"),
    ],
)
async def test_calculate(expression, expected):
    result = await run("calculate", expression=expression)
    assert (result.content, result.is_error) == (expected, False)


@pytest.mark.parametrize(
    ("expression", "message"),
    [
        ("__import__('os')", "Only numbers"),
        ("1/0", "Division by zero."),
        ("2 ** 1000", "Exponents above 100"),
        ("1 +", "Not an arithmetic expression"),
        ("1e308 * 10", "finite"),
    ],
)
async def test_calculate_refuses_what_it_cannot_do_safely(expression, message):
    result = await run("calculate", expression=expression)
    assert result.is_error
    assert message in result.content


async def test_current_time_in_a_time_zone():
    result = await run("current_time", timezone="Asia/Shanghai")
    assert not result.is_error
    assert result.content.endswith("+08:00")


async def test_bad_input_is_an_error_result_not_an_exception():
    assert "Unknown time zone" in (await run("current_time", timezone="Mars/Olympus")).content
    assert "extra" in (await run("current_time", zone="UTC")).content.lower()
    unknown = await run("nope")
    assert unknown.is_error and unknown.content.startswith("Unknown tool 'nope'")
    assert "calculate" in unknown.content  # the model is told what it may call


class EchoInput(ToolInput):
    text: str


def echo(arguments: EchoInput, context: ToolContext) -> str:
    if arguments.text == "crash":
        raise RuntimeError("a bug in the tool")
    return f"{context.conversation_id}: {arguments.text * 30_000}"


@pytest.fixture
def echo_tool():
    tool = FunctionTool(name="echo", description="Echo.", input_model=EchoInput, function=echo)
    with tools.registry.added(tool, key=tool.name):
        yield tool


async def test_a_tools_own_failure_is_an_error_result_and_long_results_are_cut(echo_tool):
    crashed = await run("echo", text="crash")
    assert (crashed.is_error, crashed.content) == (True, "echo failed: RuntimeError")
    long = await run("echo", text="x")
    assert not long.is_error and long.content.startswith("1: xxx")
    assert len(long.content) == tools.MAX_RESULT_CHARS


async def test_a_subagent_calling_a_tool_it_is_not_offered_gets_the_tools_refusal():
    spawn = tools.registered("spawn_agents")
    result = await run("spawn_agents", SUBAGENT, tasks=[{"task": "nested"}])
    assert (result.is_error, result.content) == (True, spawn.subagent_refusal)
    assert (await run("calculate", SUBAGENT, expression="1+1")).content == "2"


def test_every_tool_has_a_json_schema_for_the_model():
    specs = {spec.name: spec for spec in tools.specs()}
    assert {"current_time", "calculate", "spawn_agents"} <= set(specs)
    assert specs["calculate"].parameters["required"] == ["expression"]
    assert specs["calculate"].parameters["additionalProperties"] is False
    offered_to_subagents = {spec.name for spec in tools.specs(is_subagent=True)}
    assert {"current_time", "calculate"} <= offered_to_subagents
    assert "spawn_agents" not in offered_to_subagents
