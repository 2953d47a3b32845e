"""The model's context window: the history a request sends fits in AGENT_CONTEXT_TOKENS (or
the window the provider reports for its model).

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

With AGENT_SUMMARIZE, the note is the model's summary of what was left out instead: asked of
the model when messages are first left out (with the summary before, for messages left out
since), stored on the conversation and sent with every request after; room for it is kept.
"""

import json
from dataclasses import dataclass, replace
from itertools import pairwise

from django.conf import settings

from chat.blocks import Block, TextBlock, ToolCallBlock, ToolResultBlock
from chat.engine.providers import SYSTEM_PROMPT
from chat.engine.providers.base import REPLY_TOKENS, HistoryMessage
from chat.engine.tools import ToolSpec
from chat.models import Conversation

# The window when neither AGENT_CONTEXT_TOKENS nor the provider says.
DEFAULT_CONTEXT_TOKENS = 100_000
# What a message costs beyond its text (its role, the format around it).
MESSAGE_TOKENS = 8
LEFT_OUT_NOTE = (
    "[{count} earlier messages of this conversation were left out to fit the model's "
    "context window; ask the user if you need what they said.]"
)
SUMMARY_NOTE = (
    "[{count} earlier messages of this conversation were left out to fit the model's "
    "context window. A summary of them:]\n{summary}"
)
# The room kept for a summary, and the most of one that is kept (AGENT_SUMMARIZE).
SUMMARY_TOKENS = 1_200
SUMMARY_CHARS = 3_000
SUMMARY_PROMPT = (
    "Summarise the conversation below for yourself: you will no longer see these messages. "
    "Keep what the user asked for and decided, facts and numbers, what the tools found, and "
    "what is still open; at most 300 words, no preamble.\n\n"
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
    dropped: tuple[HistoryMessage, ...] = ()  # the messages left out, in order


async def budget_of(provider) -> int:
    """The window requests are fitted in: AGENT_CONTEXT_TOKENS when set, else the one the
    provider reports for its model (Provider.context_window), else DEFAULT_CONTEXT_TOKENS."""
    if settings.AGENT_CONTEXT_TOKENS:
        return settings.AGENT_CONTEXT_TOKENS
    reported = getattr(provider, "context_window", None)
    return (await reported() if reported else None) or DEFAULT_CONTEXT_TOKENS


def fit(
    history: list[HistoryMessage],
    specs: list[ToolSpec],
    *,
    budget: int,
    summary: "Summary | None" = None,
) -> Fitted:
    """`history` (runtime.build_history) as it fits in `budget` tokens with `specs`; raises
    ContextOverflow when even the newest user message cannot.

    With a `summary` (AGENT_SUMMARIZE), room is kept for it, the messages it covers are left
    out whether they would fit or not, and when more must go, a fifth of the window more goes
    with them: the model summarises what is left out every few turns, not at every step."""
    costs = [message_tokens(message) for message in history]
    whole = fixed_tokens(specs) + sum(costs)
    covered = summary.through if summary is not None else -1
    if whole <= budget and covered < 0:
        return Fitted(history, 0, whole)
    extra = estimate_tokens(LEFT_OUT_NOTE.format(count=len(history))) + 1
    if summary is not None:
        extra += SUMMARY_TOKENS
    total = whole + extra
    target = budget
    dropped: set[int] = set()
    for start, end in _droppable(history):
        summarized = covered >= 0 and all(m.order <= covered for m in history[start:end])
        if not summarized:
            if total <= target:
                break
            if summary is not None:
                target = budget - budget // 5
        total -= sum(costs[start:end])
        dropped.update(range(start, end))
    if total > budget:
        raise ContextOverflow(needed=total, budget=budget)
    if not dropped:
        return Fitted(history, 0, total - extra)
    kept = [message for index, message in enumerate(history) if index not in dropped]
    left_out = tuple(history[index] for index in sorted(dropped))
    fitted = Fitted(kept, len(dropped), total, left_out)
    return with_note(fitted, LEFT_OUT_NOTE.format(count=len(dropped)))


def with_note(fitted: Fitted, note: str) -> Fitted:
    """`fitted` with `note` at the start of its first message."""
    kept = list(fitted.history)
    first = kept[0]
    kept[0] = replace(first, blocks=[TextBlock(text=note), *first.blocks])
    return replace(fitted, history=kept)


def with_summary(fitted: Fitted, summary: str) -> Fitted:
    """`fitted` (with the plain note) with the summary of what it left out instead."""
    first = fitted.history[0]
    note = TextBlock(text=SUMMARY_NOTE.format(count=fitted.left_out, summary=summary))
    kept = [replace(first, blocks=[note, *first.blocks[1:]]), *fitted.history[1:]]
    return replace(fitted, history=kept)


def summary_request(previous: str, messages: tuple[HistoryMessage, ...]) -> HistoryMessage:
    """The request for a summary of `messages` (after the summary `previous` of those left
    out before them): one user message, the transcript as text."""
    lines = [f"(Summary of what came before: {previous})"] if previous else []
    for message in messages:
        for block in message.blocks:
            if isinstance(block, TextBlock):
                lines.append(f"{message.role}: {block.text}")
            elif isinstance(block, ToolCallBlock):
                lines.append(f"{message.role} called {block.name} {json.dumps(block.arguments)}")
            elif isinstance(block, ToolResultBlock):
                lines.append(f"{block.tool_call_id} returned: {block.content}")
    return HistoryMessage(role="user", blocks=[TextBlock(text=SUMMARY_PROMPT + "\n".join(lines))])


@dataclass(frozen=True)
class Summary:
    text: str
    through: int  # the order of the last message it covers; -1: none


def stored_summary(conversation_id: int) -> Summary:
    text, through = Conversation.objects.values_list(
        "context_summary", "context_summary_through"
    ).get(pk=conversation_id)
    return Summary(text, through)


def store_summary(conversation_id: int, summary: Summary) -> None:
    """Keep a summary, unless one covering more was stored meanwhile."""
    Conversation.objects.filter(
        pk=conversation_id, context_summary_through__lt=summary.through
    ).update(context_summary=summary.text[:SUMMARY_CHARS], context_summary_through=summary.through)


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
