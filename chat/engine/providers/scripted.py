"""The built-in agent: deterministic, offline, no API key, driven by a readable TOML script.

It streams its text word by word and calls tools like a real model, so every part of the
runtime (streaming, tool calls, several steps in a turn) runs without a network.
"""

import asyncio
import functools
import json
import re
import tomllib
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from chat.blocks import TextBlock, ToolResultBlock
from chat.engine.providers.base import HistoryMessage, ProviderEvent, TextDelta, ToolCallRequest
from chat.engine.tools import ToolSpec

DEFAULT_SCRIPT = Path(__file__).with_name("demo_script.toml")


@dataclass(frozen=True)
class Step:
    text: str = ""
    tool_calls: list[dict[str, Any]] = field(default_factory=list)
    # Said instead of `text` when a result of the step before is an error: a question that
    # expired or was declined has no answer to speak of.
    unanswered: str = ""


@dataclass(frozen=True)
class Rule:
    pattern: re.Pattern
    steps: list[Step]


def load_script(path: Path) -> tuple[list[Rule], list[Step]]:
    data = tomllib.loads(path.read_text(encoding="utf-8"))

    def steps(raw: list[dict]) -> list[Step]:
        return [
            Step(
                text=s.get("text", ""),
                tool_calls=s.get("tool_calls", []),
                unanswered=s.get("unanswered", ""),
            )
            for s in raw
        ]

    rules = [
        Rule(re.compile(rule["match"], re.IGNORECASE), steps(rule["steps"]))
        for rule in data.get("rules", [])
    ]
    return rules, steps(data.get("fallback", [{"text": "{said}"}]))


@functools.cache
def load_suggestions(path: Path) -> list[str]:
    """The script's `suggestions`: messages its rules answer, offered on an empty
    conversation. Kept in the script, beside the rules they match."""
    data = tomllib.loads(path.read_text(encoding="utf-8"))
    return [s for s in data.get("suggestions", []) if isinstance(s, str) and s.strip()]


def spoken(result: str) -> str:
    """A tool result as a person would say it ({answers[N]} in a script): a question's JSON
    answers as their values, a confirmation as yes or no; any other result as it is."""
    try:
        data = json.loads(result)
    except ValueError:
        return result
    if isinstance(data, dict) and isinstance(data.get("answers"), dict):
        return "; ".join(
            value if isinstance(value, str) else ", ".join(map(str, value))
            for value in data["answers"].values()
        )
    if isinstance(data, dict) and isinstance(data.get("confirmed"), bool):
        return "yes" if data["confirmed"] else "no"
    return result


def listed(result: str) -> str:
    """A tool result as a markdown list ({listed[N]} in a script): a question's chosen
    values, or the result's lines, one item each."""
    try:
        data = json.loads(result)
    except ValueError:
        data = None
    if isinstance(data, dict) and isinstance(data.get("answers"), dict):
        values = [v if isinstance(v, list) else [v] for v in data["answers"].values()]
        items = [str(item) for value in values for item in value]
    else:
        items = [line.strip() for line in result.splitlines() if line.strip()]
    return "\n".join(f"- {item}" for item in items)


class _Format(dict):
    def __missing__(self, key: str) -> str:
        return "{" + key + "}"


class ScriptedProvider:
    name = "scripted"

    def __init__(self, *, script: Path = DEFAULT_SCRIPT, delay: float = 0.0) -> None:
        self.rules, self.fallback = load_script(script)
        self.delay = delay

    def next_step(self, history: list[HistoryMessage]) -> tuple[Step, dict[str, Any]]:
        """The step to play now: the rule for the latest user message, and how far into it."""
        user_turns = [i for i, m in enumerate(history) if m.role == "user"]
        last_user = user_turns[-1] if user_turns else -1
        said = ""
        if last_user >= 0:
            said = " ".join(
                b.text for b in history[last_user].blocks if isinstance(b, TextBlock)
            ).strip()
        since = history[last_user + 1 :]
        done = sum(1 for m in since if m.role == "assistant")
        results = [b for m in since for b in m.blocks if isinstance(b, ToolResultBlock)]
        steps = next((r.steps for r in self.rules if r.pattern.search(said)), self.fallback)
        # Past the end of the script the turn ends quietly.
        step = steps[done] if done < len(steps) else Step()
        asked = len(steps[done - 1].tool_calls) if 0 < done <= len(steps) else 0
        last_results = results[-asked:] if asked else []
        if step.unanswered and any(result.is_error for result in last_results):
            step = Step(text=step.unanswered)
        shown = said if len(said) <= 200 else said[:199] + "…"
        return step, {
            "said": shown,
            "count": len(user_turns),
            "results": [result.content for result in last_results],
            "answers": [spoken(result.content) for result in last_results],
            "listed": [listed(result.content) for result in last_results],
        }

    async def stream(
        self, *, history: list[HistoryMessage], tools: list[ToolSpec]
    ) -> AsyncIterator[ProviderEvent]:
        step, values = self.next_step(history)
        try:
            text = step.text.format_map(_Format(values))
        except (IndexError, KeyError, ValueError, AttributeError):
            text = step.text
        # Words keep their following whitespace, so the concatenation is the exact text.
        for word in re.findall(r"\S+\s*", text):
            if self.delay:
                await asyncio.sleep(self.delay)
            yield TextDelta(word)
        for index, call in enumerate(step.tool_calls):
            yield ToolCallRequest(
                id=f"scripted-{len(history)}-{index}",
                name=call["name"],
                arguments=dict(call.get("arguments", {})),
            )
