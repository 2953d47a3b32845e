"""Fakes shared by the tests: a model that plays canned responses, and a question."""

from chat.providers.base import TextDelta, ToolCallRequest


class FakeProvider:
    """Plays canned responses: each a list of events, or an exception to raise."""

    name = "fake"

    def __init__(self, *responses):
        self.responses = list(responses)
        self.histories = []

    async def stream(self, *, history, tools):
        self.histories.append(history)
        response = self.responses.pop(0)
        if isinstance(response, Exception):
            raise response
        for event in response:
            yield event


PIZZA = {
    "header": "Pizza",
    "question": "Which pizza?",
    "options": [
        {"label": "Margherita", "description": "Tomato, mozzarella"},
        {"label": "Pepperoni"},
        {"label": "Funghi"},
    ],
}


class AskingModel(FakeProvider):
    """Asks the questions it is told to, then thanks the user with the tool result; records
    the tools offered on each request."""

    def __init__(self):
        super().__init__()
        self.tools = []

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
