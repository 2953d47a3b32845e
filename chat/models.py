"""Conversations and their messages. Every write to them goes through chat.transcript (the
messages and the change cursor) and chat.engine.turns (the agent's state and lease)."""

from django.conf import settings
from django.contrib.postgres.search import SearchVector, SearchVectorField
from django.db import models
from django.db.models import Case, Exists, OuterRef, Q, Subquery, Value, When
from django.utils import timezone
from django.utils.translation import gettext_lazy as _

from chat.blocks import Block, parse_blocks


class AgentState(models.TextChoices):
    # Nothing is running; the conversation waits for the user's next message.
    IDLE = "idle", _("Idle")
    # A request to the model is in flight (or about to be sent).
    LLM_REQUESTING = "llm_requesting", _("Thinking")
    # The model asked for tools, and they are running.
    TOOL_EXECUTING = "tool_executing", _("Running tools")
    # The agent asked the user a question and is paused until it is resolved.
    AWAITING_USER = "awaiting_user", _("Waiting for your answer")
    # The last turn failed; the user may retry it.
    ERROR = "error", _("Error")


RUNNING_STATES = frozenset({AgentState.LLM_REQUESTING, AgentState.TOOL_EXECUTING})


class Agent(models.TextChoices):
    """Who asks in a conversation."""

    # Parley's own agent: the model, run by the turn engine.
    PARLEY = "parley", _("Parley's agent")
    # An agent outside Parley (an MCP client): it asks its questions here and reads the answers
    # itself. The model never runs in such a conversation.
    EXTERNAL = "external", _("An agent outside Parley")


class ConversationQuerySet(models.QuerySet):
    def visible_to(self, user) -> "ConversationQuerySet":
        """The conversations `user` may read: their own and those shared with them (any
        role). Deleted ones and sub-agents' are the caller's to exclude."""
        shared = Membership.objects.filter(user=user).values("conversation_id")
        return self.filter(Q(owner=user) | Q(pk__in=shared))

    def with_role_of(self, user) -> "ConversationQuerySet":
        """Each conversation with `viewer_role` (a MemberRole value, "owner" for the owner,
        None for a stranger) and `shared` (whether it has members), in the same query."""
        return self.annotate(
            viewer_role=role_in_conversation(user),
            shared=Exists(Membership.objects.filter(conversation=OuterRef("pk"))),
        )


def role_in_conversation(user, path: str = ""):
    """An expression for `user`'s role in the conversation at `path` (e.g. "conversation__"
    from a question): "owner", a MemberRole value, or None for a stranger."""
    pk = OuterRef(f"{path.removesuffix('__')}_id" if path else "pk")
    return Case(
        When(**{f"{path}owner": user}, then=Value(OWNER)),
        default=Subquery(Membership.objects.filter(conversation=pk, user=user).values("role")[:1]),
        output_field=models.CharField(),
    )


class Conversation(models.Model):
    owner = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        on_delete=models.CASCADE,
        related_name="conversations",
        verbose_name=_("owner"),
    )
    title = models.CharField(_("title"), max_length=200, blank=True)
    agent_state = models.CharField(
        _("agent state"), max_length=20, choices=AgentState.choices, default=AgentState.IDLE
    )
    agent = models.CharField(_("agent"), max_length=12, choices=Agent.choices, default=Agent.PARLEY)
    # A change cursor: bumped by every write to the transcript, so a client that has seen
    # everything up to N can ask for exactly what changed after N.
    seq = models.PositiveBigIntegerField(_("change sequence"), default=0)
    # How many messages it holds, superseded ones included: the next message's `order`
    # (chat.transcript appends under the row's lock and saves it with the row).
    message_count = models.PositiveIntegerField(_("messages"), default=0, editable=False)
    created_at = models.DateTimeField(_("created"), default=timezone.now, editable=False)
    updated_at = models.DateTimeField(_("last activity"), default=timezone.now)
    # The running turn's lease: which runner may advance it, until when, and a fencing token
    # that every runner write must present (bumped on each claim and on stop).
    lease_owner = models.CharField(_("lease owner"), max_length=100, blank=True)
    lease_expires_at = models.DateTimeField(_("lease expires"), null=True, blank=True)
    lease_token = models.PositiveBigIntegerField(_("lease token"), default=0)
    # The person whose message, edit, Retry or Regenerate started the current turn: whose
    # "Always allow" of a tool lets its calls run without asking (none: nobody's). A
    # sub-agent's turn, and a turn started before this was recorded, have none.
    turn_started_by = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        on_delete=models.SET_NULL,
        null=True,
        blank=True,
        related_name="+",
        editable=False,
        verbose_name=_("turn started by"),
    )
    # When one of a step's several tool calls is denied, none of the others runs (those still
    # waiting are denied with it, those allowed are not run) and the model is told why; off,
    # each call goes by its own decision. On for every conversation unless its people turn it
    # off (the approvals' card).
    deny_stops_step = models.BooleanField(_("a deny stops the step"), default=True, db_default=True)
    # Model requests made in the current turn, bounded by AGENT_MAX_STEPS.
    turn_steps = models.PositiveIntegerField(_("steps this turn"), default=0)
    # Times the current turn paused for the user (a pausing tool: chat.engine.tools); each
    # pausing tool sets its own bound, such as QUESTION_MAX_PER_TURN.
    turn_pauses = models.PositiveIntegerField(_("pauses this turn"), default=0)
    # A sub-agent's conversation (chat.engine.subagents) belongs to the parent conversation's
    # tool call that spawned it, as task number `subagent_index` of that call. It has the
    # parent's owner, but is shown and reached only through the parent.
    parent = models.ForeignKey(
        "self",
        on_delete=models.CASCADE,
        null=True,
        blank=True,
        related_name="children",
        verbose_name=_("parent conversation"),
    )
    parent_tool_call_id = models.CharField(_("parent tool call"), max_length=64, blank=True)
    subagent_index = models.PositiveSmallIntegerField(_("sub-agent number"), default=0)
    # Set once it spawns a sub-agent: open pages then also look for changed children with
    # each push, which every other conversation is spared.
    has_subagents = models.BooleanField(_("has sub-agents"), default=False, editable=False)
    # With AGENT_SUMMARIZE: the model's summary of the messages left out of its context window
    # (chat.engine.window), and the order of the last message it covers (-1: none yet).
    context_summary = models.TextField(_("summary of earlier messages"), blank=True, default="")
    context_summary_through = models.IntegerField(
        _("summary covers messages up to"), default=-1, editable=False
    )
    # Kept at the top of the person's sidebar.
    pinned = models.BooleanField(_("pinned"), default=False)
    # Deleted by its owner, who may still undo it: hidden from every read for a person
    # (chat.selectors) until the sweep removes it for good (chat.services.purge_deleted).
    deleted_at = models.DateTimeField(_("deleted"), null=True, blank=True, editable=False)

    objects = ConversationQuerySet.as_manager()

    class Meta:
        verbose_name = _("conversation")
        verbose_name_plural = _("conversations")
        ordering = ["-updated_at", "-id"]
        indexes = [
            models.Index(fields=["owner", "-updated_at"], name="conversation_owner_recent"),
            models.Index(fields=["agent_state", "lease_expires_at"], name="conversation_lease"),
        ]
        constraints = [
            models.CheckConstraint(
                condition=Q(agent_state__in=AgentState.values), name="conversation_agent_state"
            ),
            models.CheckConstraint(condition=Q(agent__in=Agent.values), name="conversation_agent"),
            # Spawning is idempotent: a runner that takes over a spawn finds the children made.
            models.UniqueConstraint(
                fields=["parent", "parent_tool_call_id", "subagent_index"],
                condition=Q(parent__isnull=False),
                name="conversation_subagent_unique",
            ),
        ]

    def __str__(self) -> str:
        return self.title or str(_("Untitled conversation"))

    def save(self, *args, **kwargs) -> None:
        super().save(*args, **kwargs)
        saved = kwargs.get("update_fields")
        fields = self._meta.concrete_fields
        known = getattr(self, "_saved_values", {})
        deferred = self.get_deferred_fields()
        for field in fields:
            if (saved is None and field.attname not in deferred) or (
                saved is not None and field.name in saved
            ):
                known[field.attname] = getattr(self, field.attname)
        self._saved_values = known

    @classmethod
    def from_db(cls, db, field_names, values, **kwargs):
        """As Django's "customizing model loading" shows: the values read, so that a save
        writes only the fields set since (`changed_fields`)."""
        instance = super().from_db(db, field_names, values, **kwargs)
        instance._saved_values = dict(zip(field_names, values, strict=True))
        return instance

    def changed_fields(self) -> list[str] | None:
        """The fields set to another value since the row was read or saved (compared by
        value: every field of a conversation holds an immutable value); None for a row not
        read from the database."""
        known = getattr(self, "_saved_values", None)
        if known is None:
            return None
        deferred = self.get_deferred_fields()
        return [
            field.name
            for field in self._meta.concrete_fields
            if field.attname not in deferred
            and (field.attname not in known or getattr(self, field.attname) != known[field.attname])
        ]

    @property
    def is_running(self) -> bool:
        return self.agent_state in RUNNING_STATES

    @property
    def is_subagent(self) -> bool:
        return self.parent_id is not None

    @property
    def is_external(self) -> bool:
        """An agent outside Parley asks here: no model turn ever runs."""
        return self.agent == Agent.EXTERNAL

    @property
    def can_act(self) -> bool:
        """Whether the person it was read for (chat.selectors.conversation_for_user) may
        chat and answer in it; a conversation not read for anyone (a new one) is theirs."""
        return getattr(self, "viewer_role", OWNER) in ACTING_ROLES

    @property
    def is_owned(self) -> bool:
        """Whether the person it was read for owns it (and so manages its members)."""
        return getattr(self, "viewer_role", OWNER) == OWNER


# The role of a conversation's owner, as `viewer_role` names it beside MemberRole's.
OWNER = "owner"


class MemberRole(models.TextChoices):
    """What a person a conversation is shared with may do in it (its owner may do all)."""

    # Chats with the agent and answers its questions, as the owner does.
    PARTICIPANT = "participant", _("Participant")
    # Reads the conversation live; the server refuses everything else.
    VIEWER = "viewer", _("Viewer")


ACTING_ROLES = frozenset({OWNER, MemberRole.PARTICIPANT})


class Membership(models.Model):
    """A person a conversation is shared with by its owner, and in which role."""

    conversation = models.ForeignKey(
        Conversation,
        on_delete=models.CASCADE,
        related_name="memberships",
        verbose_name=_("conversation"),
    )
    user = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        on_delete=models.CASCADE,
        related_name="memberships",
        verbose_name=_("user"),
    )
    role = models.CharField(_("role"), max_length=12, choices=MemberRole.choices)
    added_at = models.DateTimeField(_("added"), default=timezone.now, editable=False)

    class Meta:
        verbose_name = _("member")
        verbose_name_plural = _("members")
        ordering = ["added_at", "id"]
        constraints = [
            models.UniqueConstraint(fields=["conversation", "user"], name="membership_unique"),
            models.CheckConstraint(condition=Q(role__in=MemberRole.values), name="membership_role"),
        ]

    def __str__(self) -> str:
        return f"{self.user} ({self.get_role_display()})"


# PostgreSQL's "simple" text-search configuration: words as written, in any language (no
# stemming for one language that would miss the words of another).
SEARCH_CONFIG = "simple"


class SearchDocument(SearchVector):
    """The words of a message that PostgreSQL's full-text search reads (a tsvector). SQLite
    has no text search: there the column is empty, and search matches parts of search_text."""

    def as_sqlite(self, compiler, connection, **extra_context):
        return "''", []


class MessageManager(models.Manager):
    """Messages as pages, pushes and the agent read them: without the two copies of their
    words that only search reads (search_text, search_vector), which can be large."""

    def get_queryset(self):
        return super().get_queryset().defer("search_text", "search_vector")


class Role(models.TextChoices):
    # Written by the person in the browser (or an API client).
    USER = "user", _("User")
    # Written by the model.
    ASSISTANT = "assistant", _("Assistant")
    # Results of tool calls, fed back to the model.
    TOOL = "tool", _("Tool")
    # Instructions and notices from Parley itself.
    SYSTEM = "system", _("System")


class Message(models.Model):
    conversation = models.ForeignKey(
        Conversation,
        on_delete=models.CASCADE,
        related_name="messages",
        verbose_name=_("conversation"),
    )
    role = models.CharField(_("role"), max_length=12, choices=Role.choices)
    # The person who wrote a user message (or whose answer it is); none for the agent's,
    # nor for messages stored before conversations were shared (their owner's).
    author = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        on_delete=models.SET_NULL,
        null=True,
        blank=True,
        related_name="+",
        verbose_name=_("author"),
    )
    order = models.PositiveIntegerField(_("order"))
    # A list of blocks, validated by chat.blocks on the way in and read leniently on the way out.
    blocks = models.JSONField(_("blocks"), default=list)
    # The words of `blocks` that search finds (chat.blocks.searchable_text), kept beside them
    # by every transcript write.
    search_text = models.TextField(_("searchable text"), blank=True, default="", editable=False)
    # search_text as PostgreSQL's search reads it, kept by the database itself; its GIN index
    # (migration 0010, PostgreSQL only) makes a search cost the matches, not the transcripts.
    search_vector = models.GeneratedField(
        expression=SearchDocument("search_text", config=SEARCH_CONFIG),
        output_field=SearchVectorField(),
        db_persist=True,
        verbose_name=_("search vector"),
    )
    # An assistant message still being streamed by a running turn.
    is_draft = models.BooleanField(_("draft"), default=False)
    # Replaced by a later attempt at the same turn (Regenerate, or an edited user message):
    # kept for the record, but neither shown in the transcript nor sent to the model.
    superseded = models.BooleanField(_("superseded"), default=False)
    # Bumped by every change to this message.
    version = models.PositiveIntegerField(_("version"), default=1)
    # The conversation's change cursor at this message's creation and at its last change.
    created_seq = models.PositiveBigIntegerField(_("created at change"))
    seq = models.PositiveBigIntegerField(_("changed at change"))
    created_at = models.DateTimeField(_("created"), default=timezone.now, editable=False)
    updated_at = models.DateTimeField(_("updated"), default=timezone.now)

    objects = MessageManager()

    class Meta:
        verbose_name = _("message")
        verbose_name_plural = _("messages")
        # The column, not the conversation: ordering by a foreign key orders by the related
        # model's own ordering, a join to chat_conversation on every read of messages.
        ordering = ["conversation_id", "order"]
        indexes = [models.Index(fields=["conversation", "seq"], name="message_conversation_seq")]
        constraints = [
            models.UniqueConstraint(fields=["conversation", "order"], name="message_order_unique"),
            models.CheckConstraint(condition=Q(role__in=Role.values), name="message_role"),
        ]

    def __str__(self) -> str:
        return f"{self.get_role_display()} #{self.order}"

    @property
    def parsed_blocks(self) -> list[Block]:
        return parse_blocks(self.blocks)

    @property
    def plain_text(self) -> str:
        """Its text blocks, as one text (what an edit starts from)."""
        return "\n\n".join(b.text for b in self.parsed_blocks if b.type == "text")

    @property
    def shown_blocks(self) -> list[Block]:
        """The blocks the transcript shows: none of a superseded message; not those another
        block shows (a tool result is shown on its call's card), nor failures a retry
        replaced."""
        if self.superseded:
            return []
        return [
            block
            for block in self.parsed_blocks
            if not getattr(block, "shown_elsewhere", False)
            and not getattr(block, "superseded", False)
            and block.type != "tool_result"
        ]
