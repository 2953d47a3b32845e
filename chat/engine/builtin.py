"""The tools every agent has: the time, and exact arithmetic."""

import ast
import json
import math
import operator
from datetime import UTC, datetime
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from pydantic import Field

from chat.engine.tools import FunctionTool, ToolContext, ToolError, ToolInput


class CurrentTimeInput(ToolInput):
    timezone: str = Field(
        default="UTC", max_length=64, description="An IANA time zone such as Europe/Lisbon."
    )


def current_time(arguments: CurrentTimeInput, context: ToolContext) -> str:
    try:
        zone = ZoneInfo(arguments.timezone)
    except (ZoneInfoNotFoundError, ValueError):
        raise ToolError(f"Unknown time zone {arguments.timezone!r}.") from None
    return datetime.now(UTC).astimezone(zone).isoformat(timespec="seconds")


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


def calculate(arguments: CalculateInput, context: ToolContext) -> str:
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


TOOLS = [
    FunctionTool(
        name="current_time",
        description="The current date and time, in a given IANA time zone (default UTC).",
        input_model=CurrentTimeInput,
        function=current_time,
    ),
    FunctionTool(
        name="calculate",
        description="Evaluate an arithmetic expression exactly (no variables or functions).",
        input_model=CalculateInput,
        function=calculate,
    ),
]
