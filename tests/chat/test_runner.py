"""Where turns run (chat.engine.runner): this process's runner runs each dispatched turn once
at a time, runs a turn dispatched again while its task was finishing once more after it,
hands its turns back and takes no new one once it is stopping, and its sweep finds the turns
nobody holds. A turn gives its lease back in the very change that pauses or ends it."""

import asyncio

import pytest
from asgiref.sync import async_to_sync

from chat import services
from chat.blocks import TextBlock, parse_blocks
from chat.engine import runner, runtime, turns
from chat.engine.providers.base import TextDelta
from chat.engine.runner import Runner
from chat.models import AgentState, Conversation, Role
from questions import services as questions
from questions.blocks import Answer
from tests.fakes import FakeProvider


@pytest.fixture
def turns_run(monkeypatch):
    """The turns the runner runs, in place of the real ones: the ids they were run for, in
    order. A turn run while `hold` is set waits for `release()`."""

    class Runs(list):
        def __init__(self) -> None:
            super().__init__()
            self.hold = False
            self.started = asyncio.Event()
            self.released = asyncio.Event()

        def release(self) -> None:
            self.released.set()

    runs = Runs()

    async def run_turn(conversation_id: int) -> None:
        runs.append(conversation_id)
        runs.started.set()
        if runs.hold:
            await runs.released.wait()

    monkeypatch.setattr(runtime, "run_turn", run_turn)
    return runs


@pytest.fixture
async def this_process(monkeypatch) -> Runner:
    """This process's runner, on the test's event loop."""
    process = Runner(asyncio.get_running_loop())
    monkeypatch.setattr(runner, "_runner", process)
    return process


async def test_a_dispatch_that_arrives_while_the_turns_task_is_finishing_runs_once_more_after_it(
    turns_run, this_process
):
    turns_run.hold = True
    this_process.spawn(7)
    await turns_run.started.wait()
    # The turn's task may be past its last look at the database: dispatches of the same turn
    # (the commit of an answer, say, from a request's thread) are not run beside it, nor lost.
    await asyncio.to_thread(this_process.start_soon, 7)
    await asyncio.to_thread(this_process.start_soon, 7)
    assert list(turns_run) == [7]

    turns_run.release()
    await runner.wait_for_turns()
    assert list(turns_run) == [7, 7]  # once more, however many dispatches came meanwhile


async def test_turns_of_different_conversations_run_side_by_side(turns_run, this_process):
    turns_run.hold = True
    this_process.spawn(7)
    this_process.spawn(8)
    while len(turns_run) < 2:
        turns_run.started.clear()
        await turns_run.started.wait()
    assert sorted(turns_run) == [7, 8]
    turns_run.release()
    await runner.wait_for_turns()


class WaitingModel:
    """A model whose answer never comes."""

    name = "waiting"

    def __init__(self) -> None:
        self.asked = asyncio.Event()

    async def stream(self, *, history, tools):
        self.asked.set()
        await asyncio.Event().wait()
        yield  # pragma: no cover


@pytest.mark.django_db
def test_a_stopping_process_hands_its_turns_back_at_once_and_takes_no_new_one(
    user, conversation, dispatched, use
):
    model = use(WaitingModel())
    services.post_user_message(user=user, conversation_id=conversation.pk, text="Hi")

    async def stop_while_the_turn_runs() -> dict:
        process = Runner(asyncio.get_running_loop())
        process.spawn(conversation.pk)
        await model.asked.wait()
        await process.shutdown(grace=5)
        # A dispatch that reaches the stopping process: the sweep of another takes it.
        process.spawn(conversation.pk)
        await asyncio.to_thread(process.start_soon, conversation.pk)
        return process.tasks

    assert async_to_sync(stop_while_the_turn_runs)() == {}
    stored = Conversation.objects.get(pk=conversation.pk)
    # Free for another process's sweep now, without waiting for the lease to lapse.
    assert (stored.lease_owner, stored.lease_expires_at) == ("", None)
    assert stored.agent_state == AgentState.LLM_REQUESTING
    assert turns.stale_runs() == [conversation.pk]


@pytest.mark.django_db
def test_the_sweep_runs_each_running_turn_nobody_holds(
    user, conversation, dispatched, turns_run, monkeypatch
):
    other = services.create_conversation(owner=user, title="Second chat")
    for each in (conversation, other):
        services.post_user_message(user=user, conversation_id=each.pk, text="Hi")
    services.stop_turn(user=user, conversation_id=other.pk)  # no longer running

    async def sweep() -> int:
        process = Runner(asyncio.get_running_loop())
        monkeypatch.setattr(runner, "_runner", process)
        found = await process.sweep_once()
        await runner.wait_for_turns()
        return found

    assert async_to_sync(sweep)() == 1
    assert list(turns_run) == [conversation.pk]


@pytest.mark.django_db
def test_a_duplicate_dispatch_of_a_turn_runs_nothing(user, conversation, post, use):
    model = use(FakeProvider([TextDelta("Once.")]))
    post(user, conversation, "Hi")
    async_to_sync(runtime.run_turn)(conversation.pk)  # the same dispatch, delivered again

    replies = [
        parse_blocks(m.blocks)
        for m in Conversation.objects.get(pk=conversation.pk).messages.filter(role=Role.ASSISTANT)
    ]
    assert replies == [[TextBlock(text="Once.")]]
    assert len(model.histories) == 1


@pytest.mark.django_db
def test_a_turn_that_pauses_gives_its_lease_back_in_that_very_change(
    user, conversation, ask, committed, monkeypatch, caplog
):
    """No write of the runner's own follows the pause, so an answer given right away does not
    wait behind one (on SQLite, a writer that finds the database locked backs off for tens of
    ms); the turn resumed by the answer ends the same way, and is logged as finished."""
    released = []
    monkeypatch.setattr(turns, "release", released.append)
    ask(user, conversation)
    paused = Conversation.objects.get(pk=conversation.pk)
    assert paused.agent_state == AgentState.AWAITING_USER
    assert (paused.lease_owner, paused.lease_expires_at) == ("", None)
    assert released == []

    caplog.set_level("INFO", logger="parley.runtime")
    with committed():
        questions.answer_question(
            user=user,
            conversation_id=conversation.pk,
            tool_call_id="q1",
            answers=[Answer(labels=["Pepperoni"])],
        )
    ended = Conversation.objects.get(pk=conversation.pk)
    assert ended.agent_state == AgentState.IDLE
    assert (ended.lease_owner, ended.lease_expires_at) == ("", None)
    assert released == []
    assert [r.event for r in caplog.records if hasattr(r, "event")][-1] == "finished"
    # The model got the answer at once, as the result of its question.
    last = ended.messages.order_by("order").last()
    assert parse_blocks(last.blocks) == [TextBlock(text="Thanks: Pepperoni")]
