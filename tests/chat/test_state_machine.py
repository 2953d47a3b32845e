"""Property test: random sequences of turn events (posts, claims, crashes, streamed text,
tool calls and results, failures, Stop, Retry) never reach an invalid state or lose a result."""

from datetime import timedelta

import pytest
from django.contrib.auth.models import User
from django.utils import timezone
from hypothesis import settings as hypothesis_settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    RuleBasedStateMachine,
    invariant,
    precondition,
    rule,
    run_state_machine_as_test,
)

from chat import services
from chat.blocks import ToolCallBlock, ToolResultBlock, parse_blocks
from chat.engine import runtime, turns
from chat.errors import AgentBusy, NothingToRetry, NothingToStop
from chat.models import RUNNING_STATES, AgentState, Conversation

texts = st.text(alphabet="abc xyz", min_size=1, max_size=12).filter(str.strip)


class TurnMachine(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        TurnMachine.examples += 1
        owner = User.objects.create_user(username=f"prop{TurnMachine.examples}")
        self.conversation = services.create_conversation(owner=owner)
        self.user = owner
        self.lease: turns.Lease | None = None
        self.stale: list[turns.Lease] = []
        self.calls = 0
        self.last_seq = 0

    examples = 0

    def refresh(self) -> Conversation:
        self.conversation.refresh_from_db()
        return self.conversation

    def with_lease(self, action, use_stale: bool):
        lease = self.stale[-1] if use_stale and self.stale else self.lease
        if lease is None:
            return
        try:
            action(lease)
        except turns.LeaseLost:
            if lease is self.lease:
                self.lease = None

    @rule(text=texts)
    def post(self, text):
        running = self.refresh().agent_state not in (AgentState.IDLE, AgentState.ERROR)
        try:
            services.post_user_message(
                user=self.user, conversation_id=self.conversation.pk, text=text
            )
        except AgentBusy:
            assert running
        else:
            assert not running

    @rule()
    def claim(self):
        claim = turns.claim(self.conversation.pk)
        lease = claim.lease if claim is not None else None
        if lease is not None:
            if self.lease is not None:
                self.stale.append(self.lease)
            self.lease = lease
        else:
            conversation = self.refresh()
            assert conversation.agent_state not in RUNNING_STATES or (
                conversation.lease_expires_at is not None
                and conversation.lease_expires_at > timezone.now()
            )

    @rule()
    def runner_crashes(self):
        Conversation.objects.filter(pk=self.conversation.pk).update(
            lease_expires_at=timezone.now() - timedelta(seconds=1)
        )

    @precondition(lambda self: self.lease is not None)
    @rule(text=texts, stale=st.booleans())
    def stream(self, text, stale):
        self.with_lease(lambda lease: turns.stream_text(lease, text), stale)

    @precondition(lambda self: self.lease is not None)
    @rule(stale=st.booleans())
    def begin_step(self, stale):
        self.with_lease(turns.begin_step, stale)

    @precondition(lambda self: self.lease is not None)
    @rule(text=st.sampled_from(["", "done"]), n=st.integers(0, 3), stale=st.booleans())
    def complete(self, text, n, stale):
        def act(lease):
            calls = []
            for _ in range(n):
                self.calls += 1
                calls.append(ToolCallBlock(id=f"call{self.calls}", name="calculate", arguments={}))
            turns.complete_step(lease, text=text, tool_calls=calls)

        self.with_lease(act, stale)

    @precondition(lambda self: self.lease is not None)
    @rule(stale=st.booleans(), twice=st.booleans())
    def record_result(self, stale, twice):
        def act(lease):
            pending = turns.pending_tool_calls(lease)
            if pending:
                result = ToolResultBlock(tool_call_id=pending[0].id, content="1")
                turns.record_tool_result(lease, result)
                if twice:
                    turns.record_tool_result(lease, result)

        self.with_lease(act, stale)

    @precondition(lambda self: self.lease is not None)
    @rule(stale=st.booleans())
    def tools_done(self, stale):
        self.with_lease(turns.tools_done, stale)

    @precondition(lambda self: self.lease is not None)
    @rule(stale=st.booleans())
    def fail(self, stale):
        self.with_lease(turns.fail, stale)

    @precondition(lambda self: self.lease is not None)
    @rule(stale=st.booleans())
    def release(self, stale):
        self.with_lease(turns.release, stale)

    @precondition(lambda self: self.refresh().agent_state in RUNNING_STATES)
    @rule()
    def stop(self):
        try:
            services.stop_turn(user=self.user, conversation_id=self.conversation.pk)
        except NothingToStop:
            assert self.refresh().agent_state not in RUNNING_STATES

    @rule(n=st.integers(0, 3))
    def runner_advances(self, n):
        """What a healthy runner does next, so realistic paths are common."""
        state = self.refresh().agent_state
        if state not in RUNNING_STATES:
            return
        if self.lease is None:
            self.claim()
            return
        if state == AgentState.LLM_REQUESTING:
            self.complete(text="done", n=n, stale=False)
        elif n:
            self.record_result(stale=False, twice=False)
        else:
            self.tools_done(stale=False)

    @precondition(lambda self: self.refresh().agent_state == AgentState.ERROR)
    @rule()
    def retry(self):
        try:
            services.retry_turn(user=self.user, conversation_id=self.conversation.pk)
        except NothingToRetry:
            assert self.refresh().agent_state != AgentState.ERROR

    @invariant()
    def the_sweep_finds_only_running_turns_nobody_holds(self):
        conversation = self.refresh()
        swept = conversation.pk in turns.stale_runs()
        unheld = conversation.lease_expires_at is None or conversation.lease_expires_at < (
            timezone.now()
        )
        assert swept == (conversation.agent_state in RUNNING_STATES and unheld)

    @invariant()
    def cursor_only_moves_forward(self):
        assert self.refresh().seq >= self.last_seq
        self.last_seq = self.conversation.seq

    @invariant()
    def orders_are_contiguous(self):
        orders = list(self.conversation.messages.values_list("order", flat=True))
        assert sorted(orders) == list(range(len(orders)))

    @invariant()
    def drafts_only_while_requesting(self):
        drafts = self.conversation.messages.filter(is_draft=True).count()
        assert drafts <= 1
        if drafts:
            assert self.refresh().agent_state == AgentState.LLM_REQUESTING

    @invariant()
    def no_tool_result_is_lost_or_doubled(self):
        calls, results = [], []
        for message in self.conversation.messages.filter(is_draft=False):
            for block in parse_blocks(message.blocks):
                if isinstance(block, ToolCallBlock):
                    calls.append(block.id)
                elif isinstance(block, ToolResultBlock):
                    results.append(block.tool_call_id)
        assert len(results) == len(set(results))
        assert set(results) <= set(calls)
        if self.refresh().agent_state != AgentState.TOOL_EXECUTING:
            assert sorted(results) == sorted(calls)

    @invariant()
    def history_is_always_valid_for_a_provider(self):
        history = runtime.build_history(self.conversation.pk)
        for index, message in enumerate(history):
            calls = [b.id for b in message.blocks if isinstance(b, ToolCallBlock)]
            if calls:
                assert history[index + 1].role == "tool"
                assert [b.tool_call_id for b in history[index + 1].blocks] == calls


@pytest.mark.django_db
def test_random_turn_events_never_break_the_state_machine():
    run_state_machine_as_test(
        TurnMachine,
        settings=hypothesis_settings(max_examples=60, stateful_step_count=30, deadline=None),
    )
