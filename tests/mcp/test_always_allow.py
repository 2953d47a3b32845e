"""A person's allow rule for an MCP tool is theirs alone (mcp_client.tools, in process): it
lets the tool run without asking in the turns they start, and in nobody else's: in a shared
conversation, a participant's request asks as every approval does, whatever the owner chose."""

import mcp_types as types
import pytest
from asgiref.sync import async_to_sync

from chat import services, sharing
from chat.blocks import ToolCallBlock
from chat.engine import tools, turns
from chat.engine.tools import PAUSED, ToolContext
from chat.models import AgentState, MemberRole
from mcp_client.config import parse
from mcp_client.connections import ServerConnection
from mcp_client.tools import McpTool
from questions.models import ApprovalRule, Question, QuestionKind, QuestionStatus

pytestmark = pytest.mark.django_db


class NotesServer(ServerConnection):
    """The notes server, connected in name only: the calls that reach it are recorded."""

    def __init__(self) -> None:
        super().__init__(parse('{"mcpServers": {"notes": {"command": "notes"}}}').servers[0], None)
        self.calls: list[dict] = []

    async def call_tool(self, call, arguments: dict) -> types.CallToolResult:
        self.calls.append(arguments)
        return types.CallToolResult(content=[types.TextContent(type="text", text="Saved")])


@pytest.fixture
def server() -> NotesServer:
    return NotesServer()


@pytest.fixture
def write_note(server):
    """A tool that asks first (no operator setting, and not read-only), offered to the agent."""
    tool = McpTool(server, types.Tool(name="write_note", input_schema={"type": "object"}))
    tools.register(tool)
    yield tool
    tools.unregister(tool.name)


@pytest.fixture
def shared(user, other_user, conversation):
    """`user`'s conversation, shared with `other_user` as a participant."""
    sharing.share_conversation(
        user=user,
        conversation_id=conversation.pk,
        username=other_user.username,
        role=MemberRole.PARTICIPANT,
    )
    return conversation


def always_allows(person, tool: McpTool) -> None:
    ApprovalRule.objects.create(
        scope="user", user=person, agent="parley", server="notes", tool="write_note", effect="allow"
    )


def call_in_turn_of(person, conversation, tool: McpTool):
    """`person` sends a message; the agent's step calls `tool`. What the call came to."""
    services.post_user_message(user=person, conversation_id=conversation.pk, text="Save a note")
    return call_in_running_turn(conversation, tool)


def call_in_running_turn(conversation, tool: McpTool):
    """The running turn's step calls `tool`. What the call came to."""
    claim = turns.claim(conversation.pk, step_limit=10)
    call = ToolCallBlock(id="w1", name=tool.name, arguments={"name": "groceries"})
    turns.complete_step(claim.lease, text="", tool_calls=[call])
    return async_to_sync(tool.run)(call, ToolContext(lease=claim.lease))


def asked(conversation) -> bool:
    conversation.refresh_from_db()
    return (
        conversation.agent_state == AgentState.AWAITING_USER
        and Question.objects.filter(
            conversation=conversation,
            kind=QuestionKind.TOOL_APPROVAL,
            status=QuestionStatus.PENDING,
        ).exists()
    )


def test_the_owners_always_allow_does_not_run_a_participants_call(
    other_user, shared, server, write_note, user
):
    always_allows(user, write_note)
    assert call_in_turn_of(other_user, shared, write_note) == PAUSED
    assert asked(shared)
    assert server.calls == []


def test_the_owners_always_allow_runs_the_owners_own_call_in_a_shared_conversation(
    user, shared, server, write_note
):
    always_allows(user, write_note)
    result = call_in_turn_of(user, shared, write_note)
    assert (result.content, result.is_error) == ("Saved", False)
    assert server.calls == [{"name": "groceries"}]
    assert not asked(shared)


def test_a_participants_always_allow_runs_their_own_call(other_user, shared, server, write_note):
    always_allows(other_user, write_note)
    result = call_in_turn_of(other_user, shared, write_note)
    assert (result.content, result.is_error) == ("Saved", False)
    assert server.calls == [{"name": "groceries"}]


def test_a_participants_always_allow_does_not_run_the_owners_call(
    user, other_user, shared, server, write_note
):
    always_allows(other_user, write_note)
    assert call_in_turn_of(user, shared, write_note) == PAUSED
    assert asked(shared)
    assert server.calls == []


def test_the_owners_always_allow_does_not_run_a_call_of_a_participants_regenerate(
    user, other_user, shared, server, write_note
):
    always_allows(user, write_note)
    services.post_user_message(user=user, conversation_id=shared.pk, text="Save a note")
    lease = turns.claim(shared.pk, step_limit=10).lease
    turns.complete_step(lease, text="Which note?", tool_calls=[])
    services.regenerate_reply(user=other_user, conversation_id=shared.pk)
    assert call_in_running_turn(shared, write_note) == PAUSED
    assert server.calls == []
