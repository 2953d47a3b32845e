import pytest

from chat import runtime
from chat.providers.base import TextDelta, ToolCallRequest
from tests.chat.test_runtime import FakeProvider

PIZZA = {
    "header": "Pizza",
    "question": "Which pizza?",
    "options": [
        {"label": "Margherita", "description": "Tomato, mozzarella"},
        {"label": "Pepperoni"},
        {"label": "Funghi"},
    ],
}


@pytest.fixture
def model(monkeypatch):
    """A fake model: `model.asks(tool, arguments)` makes its next turn ask that question,
    then reply "Thanks: <tool result>" once answered."""

    class Model(FakeProvider):
        def asks(self, tool="question", arguments=None, *, call_id="q1", also=()):
            calls = [*also, ToolCallRequest(call_id, tool, arguments or PIZZA)]
            self.responses.append(calls)
            self.responses.append(self.thanks)
            return self

        @staticmethod
        def thanks(history):
            result = history[-1].blocks[-1]
            return [TextDelta(f"Thanks: {result.content}")]

        async def stream(self, *, history, tools):
            self.histories.append(history)
            self.tools.append(tools)
            response = self.responses.pop(0) if self.responses else [TextDelta("Done.")]
            if callable(response):
                response = response(history)
            for event in response:
                yield event

    fake = Model()
    fake.tools = []
    monkeypatch.setattr(runtime, "get_provider", lambda: fake)
    return fake
