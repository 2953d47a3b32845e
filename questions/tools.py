"""The question tools as the engine runs them (chat.engine.tools): their names, guidance and
JSON schemas for the model; the turn boundary; validating a call, showing the question and
pausing; and how an ordinary message resolves a pending question.

Messages stored in blocks are English msgids, translated when shown.
"""

from channels.db import database_sync_to_async
from django.conf import settings
from django.utils.translation import gettext_noop

from chat.blocks import ToolCallBlock
from chat.engine.dispatch import Next
from chat.engine.tools import PAUSED, Outcome, Refusal, Tool, ToolContext
from chat.models import Message
from chat.transcript import Transcript
from questions import asking, resolving
from questions.payloads import ACTION_TYPE
from questions.schemas import (
    QUESTION_TOOL_NAMES,
    TOOL_ASK_USER_QUESTION,
    TOOL_CONFIRM_ACTION,
    TOOL_QUESTION,
    AskUserQuestionInput,
    ConfirmActionInput,
    QuestionInput,
    normalise,
)

WHEN = (
    "Ask only when you cannot reasonably proceed without the user: the request is ambiguous, "
    "there are several valid approaches and their preference matters, or a decision is "
    "costly to undo. Do NOT ask when you can make a sensible default choice, when the "
    "question is trivial, when the user already said what they want, or about something you "
    "already asked. Asking ends your turn: the conversation pauses until the user answers, "
    "and the answer comes back as this tool's result. Call it alone, as the only tool call "
    "of your message."
)

DESCRIPTIONS = {
    TOOL_QUESTION: (
        "Ask the user one question, with up to 10 short options to pick from (one, or "
        "several with multiple=true); the user may also type their own answer unless "
        "custom=false. With no options it is a free-form question. Prefer options: "
        "'Which database? PostgreSQL / MySQL / SQLite' beats 'What database do you want?'. "
        "The result is the answer text: the chosen label(s), one per line, typed text last. " + WHEN
    ),
    TOOL_ASK_USER_QUESTION: (
        "Ask the user 1-4 related clarifying questions at once, each with 2-4 options "
        "(multiSelect for several); users can also type custom answers. The result is JSON: "
        '{"answers": {"<question text>": "<label or typed text>" or [labels]}}. '
        "NOT available to sub-agents. " + WHEN
    ),
    TOOL_CONFIRM_ACTION: (
        "Ask the user to confirm an action before you take it: deleting files or data, "
        "breaking changes, anything hard to undo or affecting production. Describe the action "
        "and its consequences in details. The result is JSON: "
        '{"confirmed": true} or {"confirmed": false}; do the action only when confirmed. ' + WHEN
    ),
}

INPUTS = {
    TOOL_QUESTION: QuestionInput,
    TOOL_ASK_USER_QUESTION: AskUserQuestionInput,
    TOOL_CONFIRM_ACTION: ConfirmActionInput,
}

NOT_STANDALONE = Refusal(
    result="Not run: a question tool call must be the only tool call of its message. "
    "Make the other calls first, or ask the question alone.",
    error=gettext_noop(
        "The agent asked a question together with other tool calls, which is not allowed; "
        "nothing was run and the agent was told to ask on its own."
    ),
)
INVALID_QUESTION = gettext_noop(
    "The agent asked a question that could not be shown; it was told what to fix."
)
LIMIT = Refusal(
    result="Not asked: the limit of questions for this turn is reached. Proceed with your best "
    "judgement and say what you assumed.",
    error=gettext_noop("The agent tried to ask too many questions in one turn."),
)


class QuestionTool(Tool):
    """One of the question tools: a call shows the question and pauses the turn."""

    subagent_refusal = "Sub-agents cannot ask the user questions; decide, or report back instead."
    action_type = ACTION_TYPE
    template_name = "questions/question.html"

    def __init__(self, name: str) -> None:
        self.name = name
        self.description = DESCRIPTIONS[name]
        self.input_model = INPUTS[name]

    def enabled(self) -> bool:
        return self.name in settings.QUESTION_TOOLS

    def refuse_batch(self, calls: list[ToolCallBlock]) -> Refusal | None:
        """Under the standalone policy (spec 5.4) a question call must be its message's only
        tool call; under `sequential` the calls before it run first."""
        if settings.QUESTION_CALL_POLICY != "standalone" or len(calls) < 2:
            return None
        return NOT_STANDALONE

    async def run(self, call: ToolCallBlock, context: ToolContext) -> Outcome:
        try:
            request = normalise(call.name, call.arguments)
        except ValueError as error:
            return Refusal(
                result=f"Invalid {call.name} call, not shown to the user: {error}. "
                "Fix it and ask again.",
                error=INVALID_QUESTION,
                detail=str(error),
            )
        limit = settings.QUESTION_MAX_PER_TURN
        if await database_sync_to_async(asking.ask)(context.lease, call, request, limit=limit):
            return PAUSED
        return LIMIT

    def resolve_by_message(
        self, transcript: Transcript, call: ToolCallBlock, reply: Message, user
    ) -> Next | None:
        return resolving.auto_resolve_question(transcript, call=call, reply=reply, user=user)


TOOLS = [QuestionTool(name) for name in QUESTION_TOOL_NAMES]
