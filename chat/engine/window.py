"""The model's context window: the history a request sends fits in AGENT_CONTEXT_TOKENS.

Tokens are estimated, never counted with a provider's tokenizer (that would mean a download
or a request): a third of a token per ASCII character, two per other character, a few per
message. Real tokenizers give about a quarter of a token per English character and one or
less per Chinese character, so the estimate errs on the side of sending less.

What is left out, oldest first: whole earlier turns (a user message and everything the agent
did for it), then the oldest steps of the turn running now (a model message with its tool
calls and their results, which stay together). The system prompt, the tools and the newest
user message always stay, and a note at the start of the first message kept tells the model
how many earlier messages were left out. When even that cannot fit, nothing is sent: the
turn fails with ContextOverflow, saying so.
"""

import json
from dataclasses import dataclass
from itertools import pairwise

from django.conf import settings

from chat.blocks import Block, TextBlock, ToolCallBlock, ToolResultBlock
from chat.engine.providers import SYSTEM_PROMPT
from chat.engine.providers.base import REPLY_TOKENS, HistoryMessage
from chat.engine.tools import ToolSpec

# What a message costs beyond its text (its role, the format around it).
MESSAGE_TOKENS = 8
LEFT_OUT_NOTE = (
    "[{count} earlier messages of this conversation were left out to fit the model's "
    "context window; ask the user if you need what they said.]"
)


class ContextOverflow(Exception):
    """Even the newest user message does not fit: no request is sent."""

    def __init__(self, *, needed: int, budget: int) -> None:
        self.needed = needed
        self.budget = budget
        super().__init__(f"about {needed:,} tokens; the model's context holds {budget:,}")


def estimate_tokens(text: str) -> int:
    """A conservative estimate of what `text` costs a model, in tokens."""
    if text.isascii():
        return -(-len(text) // 3)
    other = sum(1 for char in text if not char.isascii())
    return -(-(len(text) - other) // 3) + 2 * other


def block_tokens(block: Block) -> int:
    if isinstance(block, TextBlock):
        return estimate_tokens(block.text)
    if isinstance(block, ToolCallBlock):
        return estimate_tokens(block.name) + estimate_tokens(json.dumps(block.arguments))
    if isinstance(block, ToolResultBlock):
        return estimate_tokens(block.content)
    return 0


def message_tokens(message: HistoryMessage) -> int:
    return MESSAGE_TOKENS + sum(block_tokens(block) for block in message.blocks)


def fixed_tokens(specs: list[ToolSpec]) -> int:
    """What every request costs before its history: the system prompt, the tools, and room
    for the model's reply."""
    tools = sum(
        estimate_tokens(spec.name + spec.description + json.dumps(spec.parameters))
        for spec in specs
    )
    return estimate_tokens(SYSTEM_PROMPT) + tools + REPLY_TOKENS


@dataclass(frozen=True)
class Fitted:
    history: list[HistoryMessage]
    left_out: int  # messages of the history not sent
    tokens: int  # the estimate of the whole request


def fit(history: list[HistoryMessage], specs: list[ToolSpec]) -> Fitted:
    """`history` (runtime.build_history) as it fits in AGENT_CONTEXT_TOKENS with `specs`;
    raises ContextOverflow when even the newest user message cannot."""
    budget = settings.AGENT_CONTEXT_TOKENS
    costs = [message_tokens(message) for message in history]
    total = fixed_tokens(specs) + sum(costs)
    if total <= budget:
        return Fitted(history, 0, total)
    total += estimate_tokens(LEFT_OUT_NOTE.format(count=len(history))) + 1
    dropped: set[int] = set()
    for start, end in _droppable(history):
        if total <= budget:
            break
        total -= sum(costs[start:end])
        dropped.update(range(start, end))
    if total > budget:
        raise ContextOverflow(needed=total, budget=budget)
    kept = [message for index, message in enumerate(history) if index not in dropped]
    note = TextBlock(text=LEFT_OUT_NOTE.format(count=len(dropped)))
    kept[0] = HistoryMessage(role=kept[0].role, blocks=[note, *kept[0].blocks])
    return Fitted(kept, len(dropped), total)


def _droppable(history: list[HistoryMessage]) -> list[tuple[int, int]]:
    """The (start, end) ranges of `history` that may be left out, each whole, in the order
    they go: the turns before the newest user message, oldest first (what precedes the first
    user message goes with the first); then the steps after that message (a model message
    and the results of its tool calls), oldest first, but never the newest step."""
    users = [index for index, message in enumerate(history) if message.role == "user"]
    newest = users[-1] if users else 0
    turn_starts = [0, *(index for index in users if 0 < index < newest), newest]
    turns = list(pairwise(turn_starts))
    steps = [i for i in range(newest + 1, len(history)) if history[i].role == "assistant"]
    step_ranges = list(pairwise([*steps, len(history)]))
    return [(a, b) for a, b in turns if a < b] + step_ranges[:-1]
