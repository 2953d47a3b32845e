"""A sub-agent's tool call that needs approval (mcp_client.tools.McpTool.ask_in_parent): its
approval is shown in the parent conversation, labelled with the sub-agent, in the inbox like any
other; the decision resumes that sub-agent at its call, once, while its siblings run on. A
sub-agent stopped while it waits leaves its approval cancelled.

Committed for real: the parent's, the waiting child's and the sibling's turns run on this
test's event loop at once (turns are dispatched, not run: the test runs each), and the
decision comes from another thread, as a person's request would."""

import asyncio
from dataclasses import dataclass

import pytest
from asgiref.sync import async_to_sync
from channels.db import database_sync_to_async as db

from chat import services
from chat.blocks import ToolResultBlock, parse_blocks
from chat.engine import runtime
from chat.engine.providers.base import TextDelta, ToolCallRequest
from chat.models import AgentState, Conversation, Role
from mcp_client import tools as mcp_tools
from questions import approvals, selectors, wire
from questions.models import Question, QuestionStatus

pytestmark = pytest.mark.django_db(transaction=True)

WRITE, ADD = "Sub-task: write the note", "Sub-task: add one and one"


class ByTask:
    """The model of every conversation of the test: each plays the responses listed for its
    first message (the parent's prompt, or a sub-agent's task), in order."""

    name = "fake"

    def __init__(self, **scripts) -> None:
        self.scripts = scripts

    async def stream(self, *, history, tools):
        for event in self.scripts[history[0].blocks[0].text].pop(0):
            yield event


@pytest.fixture
def model(monkeypatch, write_note):
    spawn = {"tasks": [{"title": "Notes", "task": WRITE}, {"title": "Sum", "task": ADD}]}
    provider = ByTask(
        go=[[ToolCallRequest("s1", "spawn_agents", spawn)], [TextDelta("Parent done.")]],
        **{
            WRITE: [
                [ToolCallRequest("w1", write_note.name, {"name": "groceries"})],
                [TextDelta("Wrote it.")],
            ],
            ADD: [
                [ToolCallRequest("c1", "calculate", {"expression": "1 + 1"})],
                [TextDelta("It is 2.")],
            ],
        },
    )
    monkeypatch.setattr(runtime, "get_provider", lambda: provider)
    return provider


@pytest.fixture
def quick(monkeypatch):
    monkeypatch.setattr(mcp_tools, "ELICITATION_POLL_SECONDS", 0.05)


async def until(query, what: str):
    """What `query` (run on a thread) returns once it is something, within 10 s."""
    for _ in range(200):
        if found := await db(query)():
            return found
        await asyncio.sleep(0.05)
    raise AssertionError(f"timed out waiting for {what}")


def children(conversation) -> list[Conversation]:
    return list(conversation.children.order_by("subagent_index"))


def pending_in(conversation) -> list[Question]:
    return list(Question.objects.filter(conversation=conversation, status=QuestionStatus.PENDING))


def tool_results(conversation) -> list[ToolResultBlock]:
    return [
        block
        for message in conversation.messages.filter(role=Role.TOOL).order_by("order")
        for block in parse_blocks(message.blocks)
    ]


@dataclass
class Waiting:
    """The parent's and the writer's running turns, the writer's sibling (not run yet), and
    the writer's approval, waiting in the parent."""

    parent: asyncio.Task
    writer: asyncio.Task
    sibling: Conversation
    question: Question


async def writer_waits(conversation) -> Waiting:
    """Run the parent's turn and the writer's until the writer's call waits for approval."""
    parent = asyncio.create_task(runtime.run_turn(conversation.pk))
    writer, sibling = await until(lambda: children(conversation), "the sub-agents")
    waiting = asyncio.create_task(runtime.run_turn(writer.pk))
    [question] = await until(lambda: pending_in(conversation), "the approval")
    return Waiting(parent, waiting, sibling, question)


def test_a_subagents_approval_waits_in_the_parent_and_its_allow_resumes_that_subagent_once(
    conversation, user, model, server, dispatched, quick
):
    services.post_user_message(user=user, conversation_id=conversation.pk, text="go")

    async def run() -> None:
        w = await writer_waits(conversation)
        # The sibling runs to its end while the writer waits; the parent waits on.
        await runtime.run_turn(w.sibling.pk)
        assert (await db(Conversation.objects.get)(pk=w.sibling.pk)).agent_state == AgentState.IDLE
        writer, _ = await db(children)(conversation)
        assert writer.is_running
        assert not w.parent.done() and not w.writer.done() and server.calls == []
        await db(check_the_card)(conversation, user, w.question)
        await db(approvals.decide)(
            user=user,
            conversation_id=conversation.pk,
            tool_call_id=w.question.tool_call_id,
            decision="allow",
        )
        await asyncio.wait_for(w.writer, 10)
        await asyncio.wait_for(w.parent, 10)

    async_to_sync(run)()
    assert server.calls == [{"name": "groceries"}]
    writer, _ = children(conversation)
    # Resumed at its call, not from the start: one request before the approval, one after.
    assert model.scripts[WRITE] == [] and model.scripts["go"] == []
    assert [r.content for r in tool_results(writer)] == ["Saved"]
    [result] = tool_results(conversation)
    assert "Sub-agent 1 (Notes) finished:\nWrote it." in result.content
    assert "Sub-agent 2 (Sum) finished:\nIt is 2." in result.content
    [question] = Question.objects.filter(conversation=conversation)
    assert question.status == QuestionStatus.ANSWERED and question.subagent_id == writer.pk
    assert question.answered_by == user


def check_the_card(conversation, user, question) -> None:
    """The approval is the parent's: on its page under the spawning call, named for the
    sub-agent, in the owner's inbox."""
    assert question.approval.subagent_number == 1 and question.approval.subagent == "Notes"
    assert [q.pk for q in selectors.inbox_questions_for_user(user=user)] == [question.pk]
    conversation.refresh_from_db()
    assert [q.pk for q in selectors.pending_questions(conversation)] == [question.pk]
    shown = wire.api_question(question)["approval"]
    assert (shown["subagentNumber"], shown["subagent"]) == (1, "Notes")
    from django.test import Client

    client = Client()
    client.force_login(user)
    page = client.get(f"/c/{conversation.pk}/").content.decode()
    assert "Asked by sub-agent 1: Notes" in page
    assert f'id="question-{question.tool_call_id}"' in page


def test_a_denied_subagent_call_is_not_run_and_the_subagent_reads_why(
    conversation, user, model, server, dispatched, quick
):
    model.scripts[WRITE][1] = [TextDelta("Could not write.")]
    services.post_user_message(user=user, conversation_id=conversation.pk, text="go")

    async def run() -> None:
        w = await writer_waits(conversation)
        await db(approvals.decide)(
            user=user,
            conversation_id=conversation.pk,
            tool_call_id=w.question.tool_call_id,
            decision="deny",
            feedback="Not now",
        )
        await asyncio.wait_for(w.writer, 10)
        await runtime.run_turn(w.sibling.pk)
        await asyncio.wait_for(w.parent, 10)

    async_to_sync(run)()
    assert server.calls == []
    writer, _ = children(conversation)
    [refused] = tool_results(writer)
    assert refused.is_error
    assert refused.content == mcp_tools.DENIED + mcp_tools.FEEDBACK.format(feedback="Not now")
    conversation.refresh_from_db()
    assert conversation.agent_state == AgentState.IDLE


def test_stopping_the_parent_cancels_a_waiting_subagents_approval(
    conversation, user, model, server, dispatched, quick
):
    services.post_user_message(user=user, conversation_id=conversation.pk, text="go")

    async def run() -> None:
        w = await writer_waits(conversation)
        await db(services.stop_turn)(user=user, conversation_id=conversation.pk)
        # Stop cancels the runners of the parent and its children (here: this loop's tasks,
        # as dispatch would on the runner's process).
        for task in (w.parent, w.writer):
            task.cancel()
        await asyncio.gather(w.parent, w.writer, return_exceptions=True)

    async_to_sync(run)()
    assert server.calls == []
    [question] = Question.objects.filter(conversation=conversation)
    assert question.status == QuestionStatus.CANCELLED
    assert selectors.inbox_questions_for_user(user=user) == []
