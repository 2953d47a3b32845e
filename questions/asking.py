"""What the runtime does with question tool calls: validate, enforce the turn boundary, pause.

Messages stored in blocks are English msgids, translated when shown.
"""

from channels.db import database_sync_to_async
from django.conf import settings
from django.utils.translation import gettext_noop

from chat import turns
from chat.blocks import ToolCallBlock, ToolResultBlock
from chat.tools import AgentContext
from questions.blocks import question_block
from questions.schemas import normalise
from questions.tools import is_question_call

db = database_sync_to_async

NOT_STANDALONE = gettext_noop(
    "The agent asked a question together with other tool calls, which is not allowed; "
    "nothing was run and the agent was told to ask on its own."
)
NOT_STANDALONE_RESULT = (
    "Not run: a question tool call must be the only tool call of its message. "
    "Make the other calls first, or ask the question alone."
)
INVALID_QUESTION = gettext_noop("The agent's question could not be shown:")
SUBAGENT_RESULT = "Sub-agents cannot ask the user questions; decide, or report back instead."
LIMIT = gettext_noop("The agent tried to ask too many questions in one turn.")
LIMIT_RESULT = (
    "Not asked: the limit of questions for this turn is reached. Proceed with your best "
    "judgement and say what you assumed."
)


def standalone_violation(calls: list[ToolCallBlock]) -> bool:
    """Under the standalone policy a question call must be its message's only tool call."""
    if settings.QUESTION_CALL_POLICY != "standalone" or len(calls) < 2:
        return False
    return any(is_question_call(call.name) for call in calls)


async def refuse_all(lease: turns.Lease, calls: list[ToolCallBlock]) -> None:
    await db(turns.refuse_tool_calls)(
        lease, calls, result=NOT_STANDALONE_RESULT, error=NOT_STANDALONE
    )


async def ask(lease: turns.Lease, call: ToolCallBlock, context: AgentContext) -> bool:
    """Handle one question call. True if the conversation now waits for the user."""
    if context.is_subagent:
        await db(turns.record_tool_result)(lease, _error(call, SUBAGENT_RESULT))
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
        )
        return False
    block = question_block(tool_call_id=call.id, request=request)
    if await db(turns.ask_question)(lease, call, block):
        return True
    await db(turns.refuse_tool_calls)(lease, [call], result=LIMIT_RESULT, error=LIMIT)
    return False


def _error(call: ToolCallBlock, content: str) -> ToolResultBlock:
    return ToolResultBlock(tool_call_id=call.id, content=content, is_error=True)
