import pytest

from chat import tools
from chat.blocks import ToolCallBlock
from chat.tools import AgentContext

CONTEXT = AgentContext(conversation_id=1)


def run(name, **arguments):
    return tools.execute(ToolCallBlock(id="c", name=name, arguments=arguments), CONTEXT)


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
def test_calculate(expression, expected):
    result = run("calculate", expression=expression)
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
def test_calculate_refuses_what_it_cannot_do_safely(expression, message):
    result = run("calculate", expression=expression)
    assert result.is_error
    assert message in result.content


def test_current_time_in_a_time_zone():
    result = run("current_time", timezone="Asia/Shanghai")
    assert not result.is_error
    assert result.content.endswith("+08:00")


def test_bad_input_is_an_error_result_not_an_exception():
    assert "Unknown time zone" in run("current_time", timezone="Mars/Olympus").content
    assert "extra" in run("current_time", zone="UTC").content.lower()
    assert run("nope").content.startswith("Unknown tool 'nope'")


def test_every_tool_has_a_json_schema_for_the_model():
    specs = {spec.name: spec for spec in tools.specs(CONTEXT)}
    assert {"current_time", "calculate"} <= set(specs)
    assert specs["calculate"].parameters["required"] == ["expression"]
    assert specs["calculate"].parameters["additionalProperties"] is False
