"""The built-in agent: deterministic, offline, no API key. It streams its reply word by word."""

import asyncio
import re
from collections.abc import AsyncIterator

from chat.blocks import TextBlock
from chat.providers.base import HistoryMessage, ProviderEvent, TextDelta

GREETING = (
    "Hello! I'm Parley's **scripted** demo agent. I reply the same way every time, "
    "so you can try Parley without an API key."
)


class ScriptedProvider:
    name = "scripted"

    def __init__(self, *, delay: float = 0.0) -> None:
        self.delay = delay

    def reply_to(self, history: list[HistoryMessage]) -> str:
        user_turns = [m for m in history if m.role == "user"]
        said = ""
        if user_turns:
            said = " ".join(b.text for b in user_turns[-1].blocks if isinstance(b, TextBlock))
        said = " ".join(said.split())
        if len(said) > 200:
            said = said[:199] + "…"
        opening = GREETING if len(user_turns) <= 1 else "Got it."
        return f"{opening}\n\nYou said: “{said}” (message {len(user_turns)} of this chat)."

    async def stream(self, *, history: list[HistoryMessage]) -> AsyncIterator[ProviderEvent]:
        # Words keep their following whitespace, so the concatenation is the exact reply.
        for word in re.findall(r"\S+\s*", self.reply_to(history)):
            if self.delay:
                await asyncio.sleep(self.delay)
            yield TextDelta(word)
