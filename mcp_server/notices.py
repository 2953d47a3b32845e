"""A CLI's Notification hook ("Claude needs your permission to use Bash", "Claude is waiting
for your input"), shown in that agent session's conversation.

While an approval of the session waits in Parley, the notification is about that same prompt:
the person was already told (the approval's mail and push), so it adds nothing — one prompt
reaches a person once. Otherwise it is written to the conversation as the agent's message,
cleaned of invisible characters; the conversation's open pages show it live, and it reaches
the person by mail and Web Push as a question would (reach.outbox).
"""

from django.db import transaction

from chat.blocks import TextBlock
from chat.errors import ConversationNotFound
from chat.models import AgentState, Role
from chat.selectors import conversation_for_user
from chat.transcript import Transcript
from core.text import clean_text
from mcp_server.hook_input import NotificationInput
from mcp_server.hooking import client_for
from mcp_server.models import AgentCall
from mcp_server.services import session_conversation
from reach import outbox

MAX_NOTICE_CHARS = 2_000


@transaction.atomic
def notify(*, user, agent: str, hook: NotificationInput) -> bool:
    """Show the notification in the session's conversation; False when an approval of the
    session already waits (it is that prompt's notification)."""
    client = client_for(agent=agent, session_id=hook.session_id, cwd=hook.cwd)
    newest = (
        AgentCall.objects.filter(user=user, client_name=client.name, session_id=client.session_id)
        .order_by("-created_at", "-id")
        .values_list("question__conversation_id", flat=True)
        .first()
    )
    conversation = None
    if newest is not None:
        try:
            conversation = conversation_for_user(user=user, conversation_id=newest, lock=True)
        except ConversationNotFound:
            conversation = None
    if conversation is not None and conversation.agent_state == AgentState.AWAITING_USER:
        return False
    if conversation is None:
        conversation = session_conversation(user=user, client=client)
    text = clean_text(hook.message, multiline=True)[:MAX_NOTICE_CHARS]
    title = clean_text(hook.title)[:200]
    with Transcript(conversation) as transcript:
        shown = f"**{title}**\n\n{text}" if title else text
        message = transcript.append(role=Role.ASSISTANT, blocks=[TextBlock(text=shown)])
    outbox.notify(message=message, title=title, text=text)
    return True
