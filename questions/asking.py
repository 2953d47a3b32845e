"""The question tools' pausing handler (chat.pausing): what the runtime does with question
calls — offer them, enforce the turn boundary, validate, show the question and pause — and
how an ordinary message resolves a pending question.

Messages stored in blocks are English msgids, translated when shown.
"""

from channels.db import database_sync_to_async
from django.conf import settings
from django.utils.translation import gettext_noop

from chat import turns
from chat.blocks import ToolCallBlock, ToolResultBlock
from chat.models import Conversation, Message
from chat.pausing import Refusal
from chat.tools import AgentContext, ToolSpec
from questions import blocks, services, tools
from questions.schemas import normalise

db = database_sync_to_async

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
SUBAGENT_RESULT = "Sub-agents cannot ask the user questions; decide, or report back instead."
LIMIT = gettext_noop("The agent tried to ask too many questions in one turn.")
LIMIT_RESULT = (
    "Not asked: the limit of questions for this turn is reached. Proceed with your best "
    "judgement and say what you assumed."
)


class QuestionTools:
    action_type = blocks.ACTION_TYPE
    template_name = "questions/question.html"

    def handles(self, name: str) -> bool:
        return tools.is_question_call(name)

    def specs(self, context: AgentContext) -> list[ToolSpec]:
        return tools.specs(context)

    def refuse_batch(self, calls: list[ToolCallBlock]) -> Refusal | None:
        """Under the standalone policy a question call must be its message's only tool call."""
        if settings.QUESTION_CALL_POLICY != "standalone" or len(calls) < 2:
            return None
        return NOT_STANDALONE if any(self.handles(call.name) for call in calls) else None

    async def run(self, lease: turns.Lease, call: ToolCallBlock, context: AgentContext) -> bool:
        if context.is_subagent:
            await db(turns.record_tool_result)(
                lease, ToolResultBlock.error(call.id, SUBAGENT_RESULT)
            )
            return False
        try:
            request = normalise(call.name, call.arguments)
        except ValueError as error:
            await db(turns.refuse_tool_calls)(
                lease,
                [call],
                result=f"Invalid {call.name} call, not shown to the user: {error}. "
                "Fix it and ask again.",
                error=INVALID_QUESTION,
                detail=str(error),
            )
            return False
        if await db(services.ask)(lease, call, request, limit=settings.QUESTION_MAX_PER_TURN):
            return True
        await db(turns.refuse_tool_calls)(lease, [call], result=LIMIT_RESULT, error=LIMIT)
        return False

    def resolve_by_message(self, conversation: Conversation, reply: Message) -> bool:
        return services.auto_resolve_question(conversation=conversation, reply=reply)


handler = QuestionTools()
