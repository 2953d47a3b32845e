"""Tools the agent may call: a registry of pydantic-typed tools with JSON schemas.

A tool's input is validated by its pydantic model before it runs; anything wrong (an unknown
tool, bad arguments, a failure inside) becomes an error result the model can read and fix.
"""

import ast
import functools
import json
import math
import operator
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from chat import pausing
from chat.blocks import ToolCallBlock, ToolResultBlock

MAX_RESULT_CHARS = 20_000


@dataclass(frozen=True)
class AgentContext:
    """What a tool knows about the agent calling it."""

    conversation_id: int
    is_subagent: bool = False


class ToolInput(BaseModel):
    model_config = ConfigDict(extra="forbid")


@dataclass(frozen=True)
class Tool:
    name: str
    description: str
    input_model: type[ToolInput]
    run: Callable[[ToolInput, AgentContext], str]

    def json_schema(self) -> dict:
        return json_schema(self.input_model)


@functools.cache
def json_schema(model: type[BaseModel]) -> dict:
    """A tool input's JSON schema for the model, made once per process: pydantic builds it
    anew on every call (about 1 ms each), and every step offers every tool. Read only."""
    return model.model_json_schema()


@dataclass(frozen=True)
class ToolSpec:
    """What a provider tells the model about a tool."""

    name: str
    description: str
    parameters: dict


_registry: dict[str, Tool] = {}


def register(tool: Tool) -> Tool:
    _registry[tool.name] = tool
    return tool


def specs(context: AgentContext) -> list[ToolSpec]:
    """Every tool offered to the model: the registry's and the pausing tools' (chat.pausing)."""
    builtin = [ToolSpec(t.name, t.description, t.json_schema()) for t in _registry.values()]
    return builtin + pausing.specs(context)


def execute(call: ToolCallBlock, context: AgentContext) -> ToolResultBlock:
    """Run one tool call; never raises."""
    tool = _registry.get(call.name)
    if tool is None:
        known = ", ".join(sorted(_registry))
        return ToolResultBlock.error(
            call.id, f"Unknown tool {call.name!r}. Available tools: {known}."
        )
    try:
        arguments = tool.input_model.model_validate(call.arguments)
    except ValidationError as error:
        return ToolResultBlock.error(call.id, invalid_arguments(call.name, error))
    try:
        content = tool.run(arguments, context)
    except ToolError as error:
        return ToolResultBlock.error(call.id, str(error))
    except Exception as error:  # a tool bug must not end the turn; the model is told
        return ToolResultBlock.error(call.id, f"{call.name} failed: {type(error).__name__}")
    return ToolResultBlock(tool_call_id=call.id, content=content[:MAX_RESULT_CHARS])


def invalid_arguments(name: str, error: ValidationError) -> str:
    """What the model is told about arguments its input model refused."""
    details = "; ".join(
        f"{'.'.join(str(p) for p in e['loc']) or 'input'}: {e['msg']}" for e in error.errors()
    )
    return f"Invalid arguments for {name}: {details}"


class ToolError(Exception):
    """A failure a tool reports to the model in words."""


# --- Built-in tools ----------------------------------------------------------------------------


class CurrentTimeInput(ToolInput):
    timezone: str = Field(
        default="UTC", max_length=64, description="An IANA time zone such as Europe/Lisbon."
    )


def current_time(arguments: CurrentTimeInput, context: AgentContext) -> str:
    try:
        zone = ZoneInfo(arguments.timezone)
    except (ZoneInfoNotFoundError, ValueError):
        raise ToolError(f"Unknown time zone {arguments.timezone!r}.") from None
    return datetime.now(UTC).astimezone(zone).isoformat(timespec="seconds")


register(
    Tool(
        name="current_time",
        description="The current date and time, in a given IANA time zone (default UTC).",
        input_model=CurrentTimeInput,
        run=current_time,
    )
)


class CalculateInput(ToolInput):
    expression: str = Field(
        max_length=200, description="Arithmetic such as (2 + 3) * 4 / 5 or 2 ** 10."
    )


_OPERATORS = {
    ast.Add: operator.add,
    ast.Sub: operator.sub,
    ast.Mult: operator.mul,
    ast.Div: operator.truediv,
    ast.FloorDiv: operator.floordiv,
    ast.Mod: operator.mod,
    ast.Pow: operator.pow,
    ast.USub: operator.neg,
    ast.UAdd: operator.pos,
}


def _evaluate(node: ast.AST) -> float | int:
    if isinstance(node, ast.Expression):
        return _evaluate(node.body)
    if isinstance(node, ast.Constant) and type(node.value) in (int, float):
        return node.value
    if isinstance(node, ast.UnaryOp) and type(node.op) in _OPERATORS:
        return _OPERATORS[type(node.op)](_evaluate(node.operand))
    if isinstance(node, ast.BinOp) and type(node.op) in _OPERATORS:
        left, right = _evaluate(node.left), _evaluate(node.right)
        if isinstance(node.op, ast.Pow) and abs(right) > 100:
            raise ToolError("Exponents above 100 are not supported.")
        return _OPERATORS[type(node.op)](left, right)
    raise ToolError("Only numbers and + - * / // % ** and parentheses are supported.")


def calculate(arguments: CalculateInput, context: AgentContext) -> str:
    try:
        value = _evaluate(ast.parse(arguments.expression, mode="eval"))
    except SyntaxError:
        raise ToolError(f"Not an arithmetic expression: {arguments.expression!r}.") from None
    except ZeroDivisionError:
        raise ToolError("Division by zero.") from None
    except OverflowError:
        raise ToolError("The result is too large.") from None
    if isinstance(value, float):
        if not math.isfinite(value):
            raise ToolError("The result is not a finite number.")
        if value.is_integer() and abs(value) < 1e15:
            value = int(value)
    return json.dumps(value)


register(
    Tool(
        name="calculate",
        description="Evaluate an arithmetic expression exactly (no variables or functions).",
        input_model=CalculateInput,
        run=calculate,
    )
)
