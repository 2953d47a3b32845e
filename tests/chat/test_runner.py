"""Where turns run (chat.engine.runner): this process's runner runs each dispatched turn once
at a time, runs a turn dispatched again while its task was finishing once more after it,
hands its turns back and takes no new one once it is stopping, and its sweep finds the turns
nobody holds. A turn gives its lease back in the very change that pauses or ends it."""

import asyncio
import threading

import pytest
from asgiref.sync import async_to_sync, sync_to_async

from chat import services
from chat.blocks import TextBlock, parse_blocks
from chat.engine import dispatch, runner, runtime, turns
from chat.engine.providers.base import TextDelta
from chat.engine.runner import Runner
from chat.models import AgentState, Conversation, Role
from questions import resolving as questions
from questions.payloads import Answer
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

    async def run_turn(conversation_id: int, started=None) -> None:
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
        choose(user, conversation, "Pepperoni")
    ended = Conversation.objects.get(pk=conversation.pk)
    assert ended.agent_state == AgentState.IDLE
    assert (ended.lease_owner, ended.lease_expires_at) == ("", None)
    assert released == []
    assert [r.event for r in caplog.records if hasattr(r, "event")][-1] == "finished"
    # The model got the answer at once, as the result of its question.
    last = ended.messages.order_by("order").last()
    assert parse_blocks(last.blocks) == [TextBlock(text="Thanks: Pepperoni")]


def choose(user, conversation, label: str) -> None:
    """Answer the pending question q1 with one option."""
    questions.answer_question(
        user=user,
        conversation_id=conversation.pk,
        tool_call_id="q1",
        answers=[Answer(labels=[label])],
    )


def claiming_elsewhere(conversation_id):
    raise AssertionError("the turn was claimed again after the commit that started it")


@pytest.mark.django_db
def test_where_the_process_runs_its_own_turns_the_answer_claims_the_turn_it_resumes(
    user, conversation, ask, committed, monkeypatch
):
    """One process and no queue: the answer's transaction takes the lease for this process's
    runner and starts the model request (its draft opened, its history read), so the request
    goes out as the answer commits, and the runner claims nothing again."""
    ask(user, conversation)
    monkeypatch.setattr(runtime, "claim_turn", claiming_elsewhere)

    def answer() -> tuple[Conversation, int]:
        with committed():
            choose(user, conversation, "Funghi")
            claimed = Conversation.objects.get(pk=conversation.pk)
            return claimed, claimed.messages.filter(is_draft=True).count()

    async def answer_here() -> tuple[Conversation, int]:
        process = Runner(asyncio.get_running_loop())
        monkeypatch.setattr(runner, "_runner", process)
        monkeypatch.setattr(dispatch, "_local", process)
        claimed = await sync_to_async(answer)()
        await asyncio.sleep(0)  # the commit handed the turn to this loop
        await runner.wait_for_turns()
        return claimed

    claimed, drafts = async_to_sync(answer_here)()
    # Before the commit: the answer's own transaction held the lease and the open step.
    assert (claimed.agent_state, claimed.lease_owner) == (
        AgentState.LLM_REQUESTING,
        turns.RUNNER_ID,
    )
    assert (claimed.turn_steps, drafts) == (1, 1)
    ended = Conversation.objects.get(pk=conversation.pk)
    assert ended.agent_state == AgentState.IDLE
    last = ended.messages.order_by("order").last()
    assert parse_blocks(last.blocks) == [TextBlock(text="Thanks: Funghi")]


@pytest.mark.django_db
def test_a_stopping_process_gives_back_a_turn_claimed_for_it_at_once(
    user, conversation, committed, use, monkeypatch
):
    model = use(FakeProvider([TextDelta("Never sent.")]))

    def post() -> None:
        with committed():
            services.post_user_message(user=user, conversation_id=conversation.pk, text="Hi")

    async def post_while_stopping() -> dict:
        process = Runner(asyncio.get_running_loop())
        monkeypatch.setattr(dispatch, "_local", process)
        process.stopping = True  # after the transaction claimed the turn, before it started
        await sync_to_async(post)()
        await asyncio.sleep(0)
        others = asyncio.all_tasks() - {asyncio.current_task()}
        if others:  # the loop may run none but this one
            await asyncio.wait(others)
        return process.tasks

    assert async_to_sync(post_while_stopping)() == {}
    stored = Conversation.objects.get(pk=conversation.pk)
    assert (stored.lease_owner, stored.lease_expires_at) == ("", None)
    assert turns.stale_runs() == [conversation.pk]  # for any process's sweep, now
    assert model.histories == []


@pytest.mark.django_db
def test_with_a_workers_queue_a_turn_is_left_for_a_worker_to_claim(
    user, conversation, dispatched, settings, monkeypatch
):
    settings.REDIS_URL = "redis://127.0.0.1:6379/15"
    monkeypatch.setattr(dispatch, "_local", Runner(asyncio.new_event_loop()))
    services.post_user_message(user=user, conversation_id=conversation.pk, text="Hi")
    queued = Conversation.objects.get(pk=conversation.pk)
    assert queued.lease_owner == ""
    assert queued.lease_expires_at is not None  # lapses if the worker that took it dies
    assert not queued.messages.filter(is_draft=True).exists()


async def test_a_slow_background_job_holds_up_no_other(monkeypatch):
    """Each job has its loop and thread: webhook deliveries waiting on a slow receiver do not
    keep question deadlines from running, on the sweep or when woken after a commit."""
    loop = asyncio.get_running_loop()
    release = threading.Event()
    quick_runs = asyncio.Queue()

    def slow() -> None:
        release.wait(10)

    def quick() -> None:
        loop.call_soon_threadsafe(quick_runs.put_nowait, threading.get_ident())

    process = Runner(loop)
    jobs = [loop.create_task(process.job_forever(job)) for job in (slow, quick)]
    try:
        first = await asyncio.wait_for(quick_runs.get(), 5)
        process.wake_jobs()  # as after a commit
        assert await asyncio.wait_for(quick_runs.get(), 5) == first  # its own kept thread
        assert not release.is_set()  # the slow job is still waiting all along
    finally:
        release.set()
        for job in jobs:
            job.cancel()
        await asyncio.gather(*jobs, return_exceptions=True)
