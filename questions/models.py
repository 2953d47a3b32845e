"""A question the agent asked, one row each: what was asked, how it was resolved, and whom it
waits for.

The row is what the inbox, deadlines, drafts, the API's listings and the webhooks read, and
its `status` is the first-wins switch: a question is resolved by a conditional update of a
pending row (questions.resolving). The transcript renders the question_request block stored in
the asking message's JSON (spec 5.3): what was asked, and the resolution, which every
resolution writes there from the row in the same transaction, so the two never disagree. Whom
a pending question waits for is the row's alone: its card reads it when rendered
(questions.selectors.card_state), and a change of it writes no message.
"""

from django.conf import settings
from django.db import models
from django.db.models import Q
from django.utils import timezone
from django.utils.translation import gettext
from django.utils.translation import gettext_lazy as _

from chat.blocks import ActionBlock
from chat.models import AgentState
from questions.payloads import (
    ASKED,
    CANCELLED,
    EXPIRED,
    REJECTED,
    REPLIED,
    Answer,
    ApprovalPayload,
    ApprovalRequest,
    ElicitationPayload,
    ElicitationRequest,
    QuestionPayload,
    Resolution,
    approval_block,
    elicitation_block,
    form_fields,
    question_block,
)
from questions.schemas import QuestionRequest


class QuestionKind(models.TextChoices):
    """The tool that asked (the three question tools the model is offered)."""

    # One question, up to 10 options, typed answers unless turned off.
    QUESTION = "question", _("Question")
    # 1-4 related questions with 2-4 options each.
    ASK_USER_QUESTION = "ask_user_question", _("Questions")
    # Yes or No before the agent acts.
    CONFIRM_ACTION = "confirm_action", _("Confirmation")
    # May the agent call this tool (from an MCP server) with these arguments?
    TOOL_APPROVAL = "tool_approval", _("Approval")
    # A running tool asks for values (a form) or for a link to be opened.
    ELICITATION = "elicitation", _("Request from a tool")


TOOL_REQUEST_KINDS = (QuestionKind.TOOL_APPROVAL, QuestionKind.ELICITATION)


class QuestionStatus(models.TextChoices):
    # Asked: the conversation is paused until the question is resolved.
    PENDING = "pending", _("Pending")
    # The person chose or typed an answer (browser, API or terminal); the agent resumed.
    ANSWERED = "answered", _("Answered")
    # The person sent an ordinary message instead, which became the answer.
    AUTO_RESOLVED = "auto_resolved", _("Answered by a message")
    # The person declined to answer; the agent stopped.
    REJECTED = "rejected", _("Rejected")
    # Its deadline passed unanswered; the agent resumed, told the person did not answer.
    EXPIRED = "expired", _("Expired")
    # Its turn ended some other way while it waited (it can no longer be answered).
    CANCELLED = "cancelled", _("Cancelled")


class AnsweredVia(models.TextChoices):
    """Through which channel a question was resolved (the audit's `answeredVia`)."""

    BROWSER = "browser", _("browser")
    API = "api", _("API")
    TERMINAL = "terminal", _("terminal")
    AUTO_RESOLVE = "auto-resolve", _("a message")
    EXPIRY = "expiry", _("expiry")
    # Confirmed from a signed link in an e-mail (reach.links).
    EMAIL = "email", _("e-mail")
    # Decided by an approval rule (questions.rules); the row's answers name it.
    RULE = "rule", _("a rule")
    # A button or a modal of the Slack app's message (slackbot.interactions).
    SLACK = "slack", _("Slack")


class Question(models.Model):
    conversation = models.ForeignKey(
        "chat.Conversation",
        on_delete=models.CASCADE,
        related_name="questions",
        verbose_name=_("conversation"),
    )
    # The agent's message that made the call, whose blocks hold the question_request block.
    message = models.ForeignKey(
        "chat.Message",
        on_delete=models.CASCADE,
        related_name="questions",
        verbose_name=_("message"),
    )
    tool_call_id = models.CharField(_("tool call"), max_length=64)
    kind = models.CharField(_("kind"), max_length=20, choices=QuestionKind.choices)
    # A sub-agent's approval: the child conversation whose call waits for it. The row and its
    # card are the parent's (`conversation`); `tool_call_id` is then a key made of the child
    # and its call (questions.asking.subagent_key), as the child's call ids are its own.
    subagent = models.ForeignKey(
        "chat.Conversation",
        on_delete=models.CASCADE,
        null=True,
        blank=True,
        related_name="+",
        verbose_name=_("sub-agent"),
    )
    # The normalised questions (questions.schemas.AskedQuestion, under their wire names); for an
    # approval or an elicitation, one questions.payloads.ApprovalRequest or ElicitationRequest.
    questions = models.JSONField(_("questions"))
    status = models.CharField(
        _("status"), max_length=16, choices=QuestionStatus.choices, default=QuestionStatus.PENDING
    )
    # When answered with choices: one {"labels", "custom"} per question (questions.payloads.
    # Answer); when answered by a message, null. An approval's {"decision", "arguments",
    # "feedback"}; an elicitation's {"action", "content"}. The text the answer inserted or was.
    answers = models.JSONField(_("answers"), null=True, blank=True)
    answer_text = models.TextField(_("answer text"), blank=True)
    # The user message that answered (inserted by the answer, or the person's own message).
    reply = models.ForeignKey(
        "chat.Message",
        on_delete=models.SET_NULL,
        null=True,
        blank=True,
        related_name="+",
        verbose_name=_("reply"),
    )
    # Who resolved it (nobody when it expired), when, and through which channel.
    answered_by = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        on_delete=models.SET_NULL,
        null=True,
        blank=True,
        related_name="+",
        verbose_name=_("answered by"),
    )
    answered_at = models.DateTimeField(_("answered at"), null=True, blank=True)
    answered_via = models.CharField(
        _("answered via"), max_length=16, choices=AnsweredVia.choices, blank=True
    )
    # Who it waits for: with nobody assigned, the conversation's owner and every participant;
    # else the assignee alone. Who assigned it last, and when (the audit of reassignments).
    assigned_to = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        on_delete=models.SET_NULL,
        null=True,
        blank=True,
        related_name="assigned_questions",
        verbose_name=_("assigned to"),
    )
    assigned_by = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        on_delete=models.SET_NULL,
        null=True,
        blank=True,
        related_name="+",
        verbose_name=_("assigned by"),
    )
    assigned_at = models.DateTimeField(_("assigned at"), null=True, blank=True)
    # With QUESTION_ESCALATE_AFTER: when an assigned question still pending goes back to the
    # conversation's owner (null: never), and when it did.
    escalate_at = models.DateTimeField(_("escalation due"), null=True, blank=True)
    escalated_at = models.DateTimeField(_("escalated"), null=True, blank=True)
    # When the server resolves it as expired (null: never), and when its reminder is due.
    expires_at = models.DateTimeField(_("expires"), null=True, blank=True)
    remind_at = models.DateTimeField(_("reminder due"), null=True, blank=True)
    reminded_at = models.DateTimeField(_("reminded"), null=True, blank=True)
    created_at = models.DateTimeField(_("asked"), default=timezone.now)
    updated_at = models.DateTimeField(_("updated"), default=timezone.now)

    class Meta:
        verbose_name = _("question")
        verbose_name_plural = _("questions")
        ordering = ["-created_at", "-id"]
        constraints = [
            models.UniqueConstraint(
                fields=["conversation", "tool_call_id"], name="question_tool_call_unique"
            ),
            models.CheckConstraint(
                condition=Q(status__in=QuestionStatus.values), name="question_status"
            ),
            models.CheckConstraint(
                condition=Q(answered_via="") | Q(answered_via__in=AnsweredVia.values),
                name="question_answered_via",
            ),
        ]
        indexes = [
            # The inbox and the title count: a user's pending questions.
            models.Index(
                fields=["conversation"],
                condition=Q(status="pending"),
                name="question_pending",
            ),
            # The deadline sweep.
            models.Index(
                fields=["expires_at"],
                condition=Q(status="pending", expires_at__isnull=False),
                name="question_expiry_due",
            ),
            models.Index(
                fields=["remind_at"],
                condition=Q(status="pending", reminded_at__isnull=True, remind_at__isnull=False),
                name="question_reminder_due",
            ),
            # The escalation sweep (QUESTION_ESCALATE_AFTER).
            models.Index(
                fields=["escalate_at"],
                condition=Q(status="pending", escalate_at__isnull=False),
                name="question_escalation_due",
            ),
            # The API's listing of a user's questions by status, newest first.
            models.Index(fields=["status", "-updated_at"], name="question_status_recent"),
        ]

    def __str__(self) -> str:
        return f"{self.get_kind_display()} {self.tool_call_id} ({self.get_status_display()})"

    @property
    def is_pending(self) -> bool:
        return self.status == QuestionStatus.PENDING

    @property
    def asked_while_running(self) -> bool:
        """Whether the call that asked waits for it as it runs (an elicitation, a sub-agent's
        approval), its conversation's turn running on, rather than pausing the turn."""
        return self.kind == QuestionKind.ELICITATION or self.subagent_id is not None

    @property
    def is_awaited(self) -> bool:
        """Pending, and its conversation's turn still waits for it (reads `conversation`)."""
        state = self.conversation.agent_state
        if self.asked_while_running:
            return self.is_pending and state == AgentState.TOOL_EXECUTING
        return self.is_pending and state == AgentState.AWAITING_USER

    @property
    def key(self) -> str:
        """Unique among the user's questions (tool-call ids are unique per conversation)."""
        return f"{self.conversation_id}-{self.tool_call_id}"

    @property
    def is_tool_request(self) -> bool:
        """An approval or an elicitation: asked by a tool, not in the model's own words."""
        return self.kind in TOOL_REQUEST_KINDS

    @property
    def summary(self) -> str:
        """One line saying what is asked (notifications, the live state, mail)."""
        if self.kind == QuestionKind.TOOL_APPROVAL:
            approval = self.approval
            return gettext("Allow %(tool)s (%(server)s)?") % {
                "tool": approval.title,
                "server": approval.server,
            }
        if self.kind == QuestionKind.ELICITATION:
            return self.elicitation.message
        first = self.request.questions[0]
        return first.header or first.text

    @property
    def approval(self) -> ApprovalRequest:
        return ApprovalRequest.model_validate(self.questions[0])

    @property
    def elicitation(self) -> ElicitationRequest:
        return ElicitationRequest.model_validate(self.questions[0])

    @property
    def request(self) -> QuestionRequest:
        return QuestionRequest.model_validate({"tool": self.kind, "questions": self.questions})

    @property
    def given_answers(self) -> list[Answer] | None:
        """One answer per question as the person gave it (an ordinary message that answered is
        the typed answer to each question); None unless answered."""
        if self.is_tool_request:
            return None
        if self.status == QuestionStatus.ANSWERED and self.answers is not None:
            return [Answer(**a) for a in self.answers]
        if self.status == QuestionStatus.AUTO_RESOLVED:
            return [Answer(custom=self.answer_text) for _ in self.questions]
        return None

    @property
    def resolution(self) -> Resolution:
        """The question_request block's `questionResolution` for this status."""
        return RESOLUTIONS[self.status]

    def _audit(self) -> dict:
        return {
            "tool_call_id": self.tool_call_id,
            "question_resolution": self.resolution,
            "expires_at": self.expires_at,
            "answered_by": self.answered_by.get_username() if self.answered_by_id else None,
            "answered_at": self.answered_at,
            "answered_via": self.answered_via or None,
            "assigned_to": self.assigned_to.get_username() if self.assigned_to_id else None,
        }

    @property
    def payload(self) -> "QuestionPayload | ApprovalPayload | ElicitationPayload":
        """The block's payload for this row's kind (see `question_payload`)."""
        decided = self.answers if isinstance(self.answers, dict) else {}
        if self.kind == QuestionKind.TOOL_APPROVAL:
            return ApprovalPayload(
                **self._audit(),
                **self.approval.model_dump(),
                decision=decided.get("decision"),
                rule=decided.get("rule"),
                edited_arguments=decided.get("arguments"),
                feedback=decided.get("feedback", ""),
                ended=decided.get("ended", ""),
                stopped_by=decided.get("stoppedBy", ""),
                votes=decided.get("votes", []),
            )
        if self.kind == QuestionKind.ELICITATION:
            request = self.elicitation
            return ElicitationPayload(
                **self._audit(),
                **request.model_dump(exclude={"requested_schema", "order"}),
                fields=form_fields(request.requested_schema, request.order),
                action=decided.get("action"),
                content=decided.get("content"),
            )
        return self.question_payload

    @property
    def question_payload(self) -> QuestionPayload:
        """The question_request block's payload (questions.payloads), made from this row: what
        every write of the block stores, and what pages and the API show of the row. Reads
        `answered_by` (select_related it for many)."""
        request = self.request
        pending = self.is_pending
        return QuestionPayload(
            tool_call_id=self.tool_call_id,
            tool_name=request.tool,
            questions=request.questions,
            question_resolution=self.resolution,
            answer_text=None if pending or self.reply_id is None else self.answer_text,
            answer_message_id=None if self.reply_id is None else str(self.reply_id),
            answers=None if self.answers is None else [Answer(**a) for a in self.answers],
            expires_at=self.expires_at,
            answered_by=self.answered_by.get_username() if self.answered_by_id else None,
            answered_at=self.answered_at,
            answered_via=self.answered_via or None,
            assigned_to=self.assigned_to.get_username() if self.assigned_to_id else None,
        )

    @property
    def block(self) -> ActionBlock:
        """The row's block, as the transcript shows it."""
        payload = self.payload
        if isinstance(payload, ApprovalPayload):
            return approval_block(payload)
        if isinstance(payload, ElicitationPayload):
            return elicitation_block(payload)
        return question_block(payload)


RESOLUTIONS: dict[str, Resolution] = {
    QuestionStatus.PENDING: ASKED,
    QuestionStatus.ANSWERED: REPLIED,
    QuestionStatus.AUTO_RESOLVED: REPLIED,
    QuestionStatus.REJECTED: REJECTED,
    QuestionStatus.EXPIRED: EXPIRED,
    QuestionStatus.CANCELLED: CANCELLED,
}


class QuestionDraft(models.Model):
    """What the user has chosen or typed in a pending question, not yet sent: restored in
    every tab and device, never an answer by itself, deleted when the question resolves."""

    question = models.OneToOneField(
        Question, on_delete=models.CASCADE, related_name="draft", verbose_name=_("question")
    )
    user = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        on_delete=models.CASCADE,
        related_name="question_drafts",
        verbose_name=_("user"),
    )
    # One answer per question, as questions.payloads.Answer stores it: {"labels", "custom"}.
    data = models.JSONField(_("draft"), default=list)
    # The page (one tab) that saved it last: other tabs say it is being answered elsewhere.
    client = models.CharField(_("client"), max_length=64, blank=True)
    updated_at = models.DateTimeField(_("updated"), default=timezone.now)

    class Meta:
        verbose_name = _("question draft")
        verbose_name_plural = _("question drafts")

    def __str__(self) -> str:
        return f"{self.question_id}"


class RuleScope(models.TextChoices):
    # Everyone's calls: set by an operator (MCP_CONFIG's `approval`, or staff).
    DEPLOYMENT = "deployment", _("deployment")
    # The calls in the turns one user starts, in any conversation.
    USER = "user", _("user")
    # The calls in the turns one user starts, in one conversation.
    CONVERSATION = "conversation", _("conversation")


class RuleEffect(models.TextChoices):
    # The call runs without asking.
    ALLOW = "allow", _("allow")
    # A person decides (an approval).
    ASK = "ask", _("ask")
    # The call is refused without asking.
    DENY = "deny", _("deny")


class AgentKind(models.TextChoices):
    # Parley's own agent, calling MCP tools.
    PARLEY = "parley", _("Parley")
    # Claude Code's permission requests (its hooks).
    CLAUDE_CODE = "claude-code", _("Claude Code")
    # Codex's permission requests (its hooks).
    CODEX = "codex", _("Codex")


class ApprovalRule(models.Model):
    """A rule on tool calls (questions.rules evaluates them; docs/operators/tools.md): what it
    matches (agent kind, MCP server, tool, globs on arguments), its effect, and for how long.
    A user or conversation rule belongs to `user` and counts only in the turns they start;
    a deployment rule has no user. `uses` counts its decisions (a shadow rule's would-be
    decisions), atomically (questions.rules)."""

    scope = models.CharField(_("scope"), max_length=16, choices=RuleScope.choices)
    user = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        on_delete=models.CASCADE,
        null=True,
        blank=True,
        related_name="approval_rules",
        verbose_name=_("user"),
    )
    conversation = models.ForeignKey(
        "chat.Conversation",
        on_delete=models.CASCADE,
        null=True,
        blank=True,
        related_name="+",
        verbose_name=_("conversation"),
    )
    # Empty: any agent, any server.
    agent = models.CharField(_("agent"), max_length=16, choices=AgentKind.choices, blank=True)
    server = models.CharField(_("server"), max_length=40, blank=True)
    # The tool's own name on its server (write_note, Bash); a glob ("*") matches several.
    tool = models.CharField(_("tool"), max_length=200)
    # Argument name -> glob on its value (questions.rules.value_matches); all must match.
    match = models.JSONField(_("match"), default=dict, blank=True)
    effect = models.CharField(_("effect"), max_length=8, choices=RuleEffect.choices)
    expires_at = models.DateTimeField(_("expires"), null=True, blank=True)
    max_uses = models.PositiveIntegerField(_("maximum uses"), null=True, blank=True)
    uses = models.PositiveIntegerField(_("uses"), default=0)
    last_used_at = models.DateTimeField(_("last used"), null=True, blank=True)
    # Records what it would have decided, and decides nothing.
    shadow = models.BooleanField(_("shadow"), default=False)
    # An `ask` rule may want more than one person's Allow (never the one who started the
    # turn): how many (0: every one of `approvers`), and who may give it (user names; empty:
    # anyone who may act in the conversation).
    quorum = models.PositiveSmallIntegerField(_("people who must allow"), default=1, db_default=1)
    approvers = models.JSONField(_("approvers"), default=list, blank=True, db_default=[])
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        on_delete=models.SET_NULL,
        null=True,
        blank=True,
        related_name="+",
        verbose_name=_("created by"),
    )
    created_at = models.DateTimeField(_("created"), default=timezone.now)
    updated_at = models.DateTimeField(_("updated"), default=timezone.now)

    class Meta:
        verbose_name = _("approval rule")
        verbose_name_plural = _("approval rules")
        ordering = ["-created_at", "-id"]
        constraints = [
            models.CheckConstraint(condition=Q(scope__in=RuleScope.values), name="rule_scope"),
            models.CheckConstraint(condition=Q(effect__in=RuleEffect.values), name="rule_effect"),
            models.CheckConstraint(
                condition=Q(agent="") | Q(agent__in=AgentKind.values), name="rule_agent"
            ),
            # Whose it is follows from its scope.
            models.CheckConstraint(
                condition=(
                    Q(scope="deployment", user__isnull=True, conversation__isnull=True)
                    | Q(scope="user", user__isnull=False, conversation__isnull=True)
                    | Q(scope="conversation", user__isnull=False, conversation__isnull=False)
                ),
                name="rule_owner_fits_scope",
            ),
            models.CheckConstraint(
                condition=Q(max_uses__isnull=True) | Q(max_uses__gte=1), name="rule_max_uses"
            ),
            models.CheckConstraint(
                condition=Q(quorum=1) | Q(effect="ask"), name="rule_quorum_asks"
            ),
        ]
        indexes = [models.Index(fields=["user", "tool"], name="rule_user_tool")]

    def __str__(self) -> str:
        return f"{self.effect} {self.server or '*'}/{self.tool} {self.match or ''}".strip()


class ApprovalVote(models.Model):
    """One person's Allow or Deny of an approval that wants several people's (a rule's
    `quorum`): the audit of each vote. The approval is decided by the last Allow it needs, or
    by the first Deny."""

    question = models.ForeignKey(
        Question, on_delete=models.CASCADE, related_name="votes", verbose_name=_("question")
    )
    user = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        on_delete=models.CASCADE,
        related_name="+",
        verbose_name=_("user"),
    )
    decision = models.CharField(_("decision"), max_length=8)
    via = models.CharField(_("via"), max_length=16, choices=AnsweredVia.choices)
    created_at = models.DateTimeField(_("cast"), default=timezone.now)

    class Meta:
        verbose_name = _("approval vote")
        verbose_name_plural = _("approval votes")
        ordering = ["created_at", "id"]
        constraints = [
            models.UniqueConstraint(fields=["question", "user"], name="one_vote_per_person"),
        ]

    def __str__(self) -> str:
        return f"{self.user} {self.decision}"
