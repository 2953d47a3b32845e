"""Approval rules: may a tool call run without asking, must it ask, or is it refused? One
policy for Parley's own agent's MCP tools and the CLIs' permission requests (Claude Code,
Codex). The rows are questions.models.ApprovalRule; the operator's rules in MCP_CONFIG come
from the `configured` registry (mcp_client adds them from its AppConfig.ready()).

`evaluate(*, user, conversation, agent, server, tool, arguments)` is deterministic:

1. The candidates are the deployment's rules (the operator's file and deployment rows), the
   user's own user rules, and the user's rules for this conversation. `user` is the person
   whose turn made the call (None: only deployment rules count).
2. A rule matches when its `agent` and `server` are empty or equal to the call's, its `tool`
   (a glob: `write_note`, `*`) matches the tool's own name, and every entry of its `match`
   matches: the argument is present and the glob matches its value (a string as it is, any
   other value as compact JSON with sorted keys; `value_matches`). A rule past its
   `expiresAt`, or with `maxUses` used up, does not match. A `command` argument holding a
   shell control character (; & | ` $ ( ) < > or a line break) matches an `allow` glob only
   when the glob is the command itself, escaped: `npm test*` never allows `npm test; rm -rf ~`.
3. Matching shadow rules decide nothing: each is recorded (its `uses` counted, the call's
   approval row names it) and set aside.
4. If a deployment rule with effect `deny` matches, the most specific of those decides: no
   user or conversation rule overrides an operator's deny.
5. Otherwise the most specific match decides. Specificity counts 1 for each of: `agent` set,
   `server` set, a `tool` without glob characters, each `match` entry, conversation scope.
   At equal specificity `deny` beats `ask` beats `allow`; then a deployment rule beats a
   conversation rule beats a user rule; then the older rule (lower id) wins.
6. No rule matches: the caller's `default` (Parley's MCP tools: the operator's `default`/
   `tools` policy, else read-only tools run and others ask; the CLIs: ask).
7. The deciding rule spends one use (a conditional update: two calls cannot both spend the
   last use); if it has none left by then, evaluation starts again without it.

Any exception while evaluating gives `ask` — never `allow` — and is logged.

"Always allow" makes `narrowest_rule_for(...)`: never wider than what the person saw.
"""

import fnmatch
import json
import logging
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field, replace
from datetime import datetime
from typing import Annotated, Any, Literal

from django.db import transaction
from django.db.models import F, Q
from django.utils import timezone
from django.utils.translation import gettext_lazy as _
from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    ValidationInfo,
    field_validator,
    model_validator,
)
from pydantic.alias_generators import to_camel

from chat.errors import ConversationNotFound, NotAllowed
from chat.selectors import Need, conversation_for_user
from core.errors import ParleyError
from core.registry import Registry
from core.text import drop_invisible
from questions.models import ApprovalRule, Question, QuestionKind, RuleEffect, RuleScope
from questions.payloads import MAX_ARGUMENTS_CHARS, RuleNote, clip

logger = logging.getLogger("parley.questions.rules")

ALLOW, ASK, DENY = RuleEffect.ALLOW.value, RuleEffect.ASK.value, RuleEffect.DENY.value
DEPLOYMENT, USER, CONVERSATION = (
    RuleScope.DEPLOYMENT.value,
    RuleScope.USER.value,
    RuleScope.CONVERSATION.value,
)
# Ties at equal specificity: deny first, then ask, then allow; deployment, conversation, user.
EFFECT_RANK = {DENY: 0, ASK: 1, ALLOW: 2}
SCOPE_RANK = {DEPLOYMENT: 0, CONVERSATION: 1, USER: 2}

MAX_MATCH_ENTRIES = 20
MAX_ARGUMENT_NAME = 100
# As long as the arguments a person may send (questions.payloads.MAX_ARGUMENTS_CHARS), so that
# "Always allow" can keep any value it was shown.
MAX_GLOB_CHARS = MAX_ARGUMENTS_CHARS
MAX_LABEL_CHARS = 200
MAX_USES = 1_000_000
MAX_ID = 2**63 - 1
GLOB_CHARS = re.compile(r"[*?\[]")
SHELL_CONTROL = re.compile(r"[;&|`$()<>\n\r]")
# A command's second word is part of its prefix when it names a subcommand (`npm test`,
# `git status`), not an option or a path.
SUBCOMMAND = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.:-]*")
COMMAND = "command"

Effect = Literal["allow", "ask", "deny"]
Scope = Literal["deployment", "user", "conversation"]
Agent = Literal["parley", "claude-code", "codex"]


class RuleNotFound(ParleyError):
    status = 404
    default_message = _("There is no such rule.")


class RuleReadOnly(ParleyError):
    status = 403
    default_message = _("Only staff can change the deployment's rules.")


class InvalidRule(ParleyError):
    """A rule that cannot be kept; `field` names what is wrong (its API name)."""

    status = 422

    def __init__(self, field: str, message: str) -> None:
        self.field = field
        super().__init__(message)


NO_CONVERSATION = _("You cannot act in this conversation.")
IN_THE_PAST = _("The expiry time must be in the future.")


# --- A rule, wherever it is kept -----------------------------------------------------------------


@dataclass(frozen=True)
class Rule:
    """One rule as evaluation reads it: a row's (`pk` set) or the operator's file's."""

    id: str
    scope: str
    tool: str
    effect: str
    agent: str = ""
    server: str = ""
    match: dict[str, str] = field(default_factory=dict)
    expires_at: datetime | None = None
    max_uses: int | None = None
    uses: int = 0
    shadow: bool = False
    pk: int | None = None
    user_id: int | None = None
    conversation_id: int | None = None
    # An ask rule's two-person approval (ApprovalRule.quorum, .approvers).
    quorum: int = 1
    approvers: tuple[str, ...] = ()

    @classmethod
    def of(cls, row: ApprovalRule) -> "Rule":
        return cls(
            id=str(row.pk),
            scope=row.scope,
            tool=row.tool,
            effect=row.effect,
            agent=row.agent,
            server=row.server,
            match=dict(row.match or {}),
            expires_at=row.expires_at,
            max_uses=row.max_uses,
            uses=row.uses,
            shadow=row.shadow,
            pk=row.pk,
            user_id=row.user_id,
            conversation_id=row.conversation_id,
            quorum=row.quorum,
            approvers=tuple(row.approvers or ()),
        )

    @property
    def needed(self) -> int:
        """How many people's Allow the calls it asks for need."""
        return self.quorum or len(self.approvers)

    @property
    def specificity(self) -> int:
        return (
            bool(self.agent)
            + bool(self.server)
            + (not GLOB_CHARS.search(self.tool))
            + len(self.match)
            + (self.scope == CONVERSATION)
        )

    @property
    def order(self) -> tuple:
        """Sorts the deciding rule first (module docstring, step 5)."""
        return (
            -self.specificity,
            EFFECT_RANK[self.effect],
            SCOPE_RANK[self.scope],
            self.pk if self.pk is not None else -1,
            self.id,
        )

    @property
    def uses_left(self) -> int | None:
        return None if self.max_uses is None else max(0, self.max_uses - self.uses)

    @property
    def label(self) -> str:
        """The text that names it to a person: its argument globs, else its tool (cut to
        MAX_LABEL_CHARS)."""
        if self.match:
            return clip(
                ", ".join(
                    glob if len(self.match) == 1 else f"{name}={glob}"
                    for name, glob in sorted(self.match.items())
                ),
                MAX_LABEL_CHARS,
            )
        return clip(self.tool, MAX_LABEL_CHARS)

    def note(self, *, created: bool = False) -> RuleNote:
        return RuleNote(
            id=self.id,
            scope=self.scope,
            label=self.label,
            effect=self.effect,
            uses_left=self.uses_left,
            created=created,
            needed=self.needed if self.effect == ASK else 1,
            approvers=list(self.approvers),
        )

    def live(self, now: datetime) -> bool:
        if self.expires_at is not None and self.expires_at <= now:
            return False
        return self.max_uses is None or self.uses < self.max_uses

    def matches(self, *, agent: str, server: str, tool: str, arguments: dict) -> bool:
        if self.agent and self.agent != agent:
            return False
        if self.server and self.server != server:
            return False
        if not fnmatch.fnmatchcase(tool, self.tool):
            return False
        for name, glob in self.match.items():
            if name not in arguments:
                return False
            if not value_matches(
                glob, arguments[name], command=name == COMMAND, allow=self.effect == ALLOW
            ):
                return False
        return True


def value_matches(glob: str, value: Any, *, command: bool = False, allow: bool = False) -> bool:
    """Whether `glob` matches an argument's value (a string as it is, anything else as compact
    JSON with sorted keys). An allow glob on a command holding a shell control character
    matches only that exact command."""
    text = value if isinstance(value, str) else as_json(value)
    if command and allow and isinstance(value, str) and SHELL_CONTROL.search(text):
        return glob == glob_escape(text)
    return fnmatch.fnmatchcase(text, glob)


def as_json(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, sort_keys=True, separators=(",", ":"))


def glob_escape(text: str) -> str:
    """`text` as a glob that matches exactly it."""
    return "".join(f"[{c}]" if c in "*?[" else c for c in text)


# The operator's rules: callables giving the rules of MCP_CONFIG (mcp_client.apps).
configured: Registry[Callable[[], Iterable[Rule]]] = Registry("configured approval rules")


# --- Evaluation -------------------------------------------------------------------------------


@dataclass(frozen=True)
class Verdict:
    """What the rules decided for one call: `effect`, and the rule that decided it (None when
    no rule matched and the default applied, or evaluation failed: `failed`); the shadow
    rules that matched (recorded, deciding nothing)."""

    effect: str
    rule: Rule | None = None
    shadow: tuple[Rule, ...] = ()
    failed: bool = False

    @property
    def note(self) -> RuleNote | None:
        return None if self.rule is None else self.rule.note()


def evaluate(
    *,
    user,
    conversation,
    agent: str,
    server: str,
    tool: str,
    arguments: dict,
    default: str = ASK,
    spend: bool = True,
) -> Verdict:
    """The verdict of the rules on one call (module docstring). `user`: a user, their id,
    or None; `conversation`: a conversation, its id, or None. `default`: the effect when no
    rule matches. `spend=False` (a dry run) counts no use. Never raises: an error asks."""
    try:
        return _evaluate(
            user_id=getattr(user, "pk", user),
            conversation_id=getattr(conversation, "pk", conversation),
            agent=agent,
            server=server or "",
            tool=tool,
            arguments=arguments,
            default=default,
            spend=spend,
        )
    except Exception:
        logger.exception("Evaluating the approval rules failed for %s/%s: asking", server, tool)
        return Verdict(effect=ASK, failed=True)


def _evaluate(
    *, user_id, conversation_id, agent, server, tool, arguments, default, spend
) -> Verdict:
    if not isinstance(arguments, dict):
        raise TypeError("a tool call's arguments must be an object")
    if default not in EFFECT_RANK:
        raise ValueError(f"no such effect: {default!r}")
    now = timezone.now()
    rows = _rows(user_id, conversation_id, agent, server, tool, now)
    candidates = [
        rule
        for rule in [*configured_rules(), *rows]
        if rule.live(now)
        and rule.matches(agent=agent, server=server, tool=tool, arguments=arguments)
    ]
    shadow = tuple(sorted((r for r in candidates if r.shadow), key=lambda r: r.order))
    deciding = [r for r in candidates if not r.shadow]
    if spend and shadow:
        _count(shadow, now)
    while deciding:
        operator_denies = [r for r in deciding if r.scope == DEPLOYMENT and r.effect == DENY]
        rule = min(operator_denies or deciding, key=lambda r: r.order)
        if not spend or _spend(rule, now):
            if spend:
                rule = replace(rule, uses=rule.uses + 1)
            return Verdict(effect=rule.effect, rule=rule, shadow=shadow)
        deciding.remove(rule)  # another call took its last use
    return Verdict(effect=default, shadow=shadow)


def configured_rules() -> list[Rule]:
    return [rule for source in configured for rule in source()]


def _rows(user_id, conversation_id, agent, server, tool, now) -> list[Rule]:
    """The rows that may match (one query): the deployment's, the user's own, and theirs
    for this conversation, for this agent and server, not expired."""
    whose = Q(scope=DEPLOYMENT)
    if user_id is not None:
        whose |= Q(scope=USER, user_id=user_id)
        if conversation_id is not None:
            whose |= Q(scope=CONVERSATION, user_id=user_id, conversation_id=conversation_id)
    rows = (
        ApprovalRule.objects.filter(whose)
        .filter(Q(agent="") | Q(agent=agent), Q(server="") | Q(server=server))
        .filter(
            Q(tool=tool) | Q(tool__contains="*") | Q(tool__contains="?") | Q(tool__contains="[")
        )
        .filter(Q(expires_at__isnull=True) | Q(expires_at__gt=now))
    )
    return [Rule.of(row) for row in rows]


def _spend(rule: Rule, now: datetime) -> bool:
    """Count one use of the deciding rule; False if it had none left (a row's count is a
    conditional update, so concurrent calls never spend more than `maxUses`)."""
    if rule.pk is None:
        return True
    rows = ApprovalRule.objects.filter(pk=rule.pk)
    if rule.max_uses is not None:
        rows = rows.filter(uses__lt=F("max_uses"))
    return bool(rows.update(uses=F("uses") + 1, last_used_at=now))


def _count(shadow: tuple[Rule, ...], now: datetime) -> None:
    """Record the shadow rules' would-be decisions (one update for them all)."""
    for rule in shadow:
        logger.info("Shadow rule %s would have decided %s", rule.id, rule.effect)
    kept = [rule.pk for rule in shadow if rule.pk is not None]
    if kept:
        ApprovalRule.objects.filter(pk__in=kept).update(uses=F("uses") + 1, last_used_at=now)


# --- "Always allow" ---------------------------------------------------------------------------


def narrowest_rule_for(
    *,
    user,
    conversation,
    agent: str,
    server: str,
    tool: str,
    arguments: dict,
    widen: bool = False,
) -> ApprovalRule | None:
    """The narrowest allow rule covering the call the person saw (not saved): theirs, for this
    agent kind, this server and tool, this conversation unless `widen`. A call whose input has
    a `command` string: that command's first word, and its subcommand if it has one, as a
    prefix glob (`npm test` → `npm test*`; never `*`), or the whole command, exactly, if it
    holds a shell control character. Any other call: every argument exactly. None when the
    arguments cannot be written as a rule (too many, or too long)."""
    command = arguments.get(COMMAND)
    if isinstance(command, str):
        match = {COMMAND: command_glob(command)}
    else:
        if len(arguments) > MAX_MATCH_ENTRIES:
            return None
        match = {
            str(name): glob_escape(value if isinstance(value, str) else as_json(value))
            for name, value in arguments.items()
        }
    if any(len(name) > MAX_ARGUMENT_NAME or not name for name in match) or any(
        len(glob) > MAX_GLOB_CHARS for glob in match.values()
    ):
        return None
    conversation_id = getattr(conversation, "pk", conversation)
    scoped = widen or conversation_id is None
    return ApprovalRule(
        scope=USER if scoped else CONVERSATION,
        user_id=getattr(user, "pk", user),
        conversation_id=None if scoped else conversation_id,
        agent=agent,
        server=server or "",
        tool=tool,
        match=match,
        effect=ALLOW,
        created_by_id=getattr(user, "pk", user),
    )


def command_glob(command: str) -> str:
    """A command's prefix glob (narrowest_rule_for)."""
    if SHELL_CONTROL.search(command):
        return glob_escape(command)
    words = command.split()
    if not words:
        return glob_escape(command)
    prefix = words[:2] if len(words) > 1 and SUBCOMMAND.fullmatch(words[1]) else words[:1]
    return glob_escape(" ".join(prefix)) + "*"


# --- Rules as people write them (the API, Settings, MCP_CONFIG) ---------------------------------


def visible(text: str) -> bool:
    """No invisible or control characters (a rule's text is shown to people and stored as
    JSON): core.text.drop_invisible would keep it as it is, and it holds no line break."""
    return drop_invisible(text) == text and not any(c in text for c in "\r\n\t")


class _Fields(BaseModel):
    model_config = ConfigDict(
        extra="forbid", alias_generator=to_camel, validate_by_name=True, serialize_by_alias=True
    )

    @field_validator("tool", check_fields=False)
    @classmethod
    def _tool(cls, value):
        if value is not None and (not value.strip() or not visible(value)):
            raise ValueError("a tool's name, or a glob on it")
        return value

    @field_validator("server", check_fields=False)
    @classmethod
    def _server(cls, value):
        if value and not re.fullmatch(r"[A-Za-z0-9_-]{1,40}", value):
            raise ValueError("a server's name: letters, digits, _ and -")
        return value

    @field_validator("match", check_fields=False)
    @classmethod
    def _match(cls, value):
        if value is None:
            return value
        if len(value) > MAX_MATCH_ENTRIES:
            raise ValueError(f"at most {MAX_MATCH_ENTRIES} entries")
        for name, glob in value.items():
            if not name or len(name) > MAX_ARGUMENT_NAME or not visible(name):
                raise ValueError(f"an argument's name has 1 to {MAX_ARGUMENT_NAME} characters")
            if not glob or len(glob) > MAX_GLOB_CHARS or not visible(glob):
                raise ValueError(f"a glob has 1 to {MAX_GLOB_CHARS} visible characters")
        return value

    @field_validator("expires_at", check_fields=False)
    @classmethod
    def _expires(cls, value):
        if value is not None and timezone.is_naive(value):
            raise ValueError("a time with its offset (2026-12-31T18:00:00Z)")
        return value


MAX_QUORUM = 10
MAX_APPROVERS = 50
# How many people must allow: a number, or "all" (every one of the approvers: stored as 0).
Quorum = Annotated[int, Field(ge=1, le=MAX_QUORUM)] | Literal["all"]
Approvers = Annotated[
    list[Annotated[str, Field(min_length=1, max_length=150)]], Field(max_length=MAX_APPROVERS)
]
Tool = Annotated[str, Field(min_length=1, max_length=200)]
Server = Annotated[str, Field(max_length=40)]
Uses = Annotated[int, Field(ge=1, le=MAX_USES)]


class RuleIn(_Fields):
    """A new rule (POST /api/v1/rules, Settings' "Add rule", MCP_CONFIG's `approval.rules`)."""

    scope: Scope = USER
    conversation_id: Annotated[int, Field(ge=1, le=MAX_ID)] | None = None
    agent: Agent | None = None
    server: Server = ""
    tool: Tool
    match: dict[str, str] = {}
    effect: Effect
    expires_at: datetime | None = None
    max_uses: Uses | None = None
    shadow: bool = False
    approvers: Approvers = []
    quorum: Quorum = 1

    @field_validator("quorum")
    @classmethod
    def _quorum(cls, value, info: ValidationInfo):
        check_quorum(info.data.get("effect"), stored_quorum(value), info.data.get("approvers", []))
        return value

    @model_validator(mode="after")
    def _scoped(self):
        if self.scope == CONVERSATION and self.conversation_id is None:
            raise ValueError("conversationId: a conversation rule needs it")
        if self.scope != CONVERSATION and self.conversation_id is not None:
            raise ValueError("conversationId: only a conversation rule has one")
        return self


def stored_quorum(quorum) -> int:
    return 0 if quorum == "all" else quorum


def check_quorum(effect: str, quorum: int, approvers: list[str]) -> None:
    """A rule that wants several people asks, and can be met by the approvers it names."""
    if quorum != 1 and effect != ASK:
        raise ValueError("only an ask rule wants several people")
    if quorum == 0 and not approvers:
        raise ValueError('"all" needs its approvers')
    if approvers and quorum > len(approvers):
        raise ValueError("more people than the approvers listed")


class RuleChanges(_Fields):
    """Changes to a rule (PATCH): the fields given replace the rule's; a null clears an
    optional one. Scope and conversation stay."""

    agent: Agent | None = None
    server: Server | None = None
    tool: Tool | None = None
    match: dict[str, str] | None = None
    effect: Effect | None = None
    expires_at: datetime | None = None
    max_uses: Uses | None = None
    shadow: bool | None = None
    quorum: Quorum | None = None
    approvers: Approvers | None = None


# --- Reading and writing the rows -------------------------------------------------------------


def rules_for_user(*, user) -> list[ApprovalRule]:
    """The rules that count in `user`'s turns: the deployment's rows, their own user rules,
    and their conversation rules (newest first)."""
    return list(
        ApprovalRule.objects.filter(
            Q(scope=DEPLOYMENT) | Q(user=user, scope__in=[USER, CONVERSATION])
        ).select_related("conversation")
    )


def rule_for_user(*, user, rule_id: int, write: bool = False) -> ApprovalRule:
    """A rule `user` may see (and, with `write`, change: their own, or a deployment rule for
    staff), the row locked when writing. RuleNotFound for anyone else's; RuleReadOnly for a
    deployment rule a non-staff user would change."""
    rows = ApprovalRule.objects.filter(
        Q(scope=DEPLOYMENT) | Q(user=user, scope__in=[USER, CONVERSATION])
    )
    if write:
        rows = rows.select_for_update(of=("self",))
    rule = rows.filter(pk=rule_id).first() if 0 < rule_id <= MAX_ID else None
    if rule is None:
        raise RuleNotFound
    if write and rule.scope == DEPLOYMENT and not user.is_staff:
        raise RuleReadOnly
    return rule


@transaction.atomic
def create_rule(*, user, spec: RuleIn) -> ApprovalRule:
    """Keep a new rule for `user` (a deployment rule: staff only). Raises InvalidRule naming
    the field, RuleReadOnly."""
    if spec.scope == DEPLOYMENT and not user.is_staff:
        raise RuleReadOnly
    if spec.scope == CONVERSATION:
        _check_conversation(user, spec.conversation_id)
    _check_expiry(spec.expires_at)
    now = timezone.now()
    return ApprovalRule.objects.create(
        scope=spec.scope,
        user=None if spec.scope == DEPLOYMENT else user,
        conversation_id=spec.conversation_id,
        agent=spec.agent or "",
        server=spec.server,
        tool=spec.tool,
        match=spec.match,
        effect=spec.effect,
        expires_at=spec.expires_at,
        max_uses=spec.max_uses,
        shadow=spec.shadow,
        quorum=stored_quorum(spec.quorum),
        approvers=spec.approvers,
        created_by=user,
        created_at=now,
        updated_at=now,
    )


@transaction.atomic
def update_rule(*, user, rule_id: int, changes: RuleChanges) -> ApprovalRule:
    """Change the given fields of a rule `user` may change."""
    rule = rule_for_user(user=user, rule_id=rule_id, write=True)
    given = changes.model_fields_set
    if "expires_at" in given:
        _check_expiry(changes.expires_at)
    for name in given:
        value = getattr(changes, name)
        if name in ("agent", "server"):
            value = value or ""
        elif name == "quorum":
            value = 1 if value is None else stored_quorum(value)
        elif name == "approvers":
            value = value or []
        elif name in ("tool", "effect", "match", "shadow") and value is None:
            raise InvalidRule(to_camel(name), _("This field cannot be cleared."))
        setattr(rule, name, value)
    try:
        check_quorum(rule.effect, rule.quorum, rule.approvers)
    except ValueError as error:
        raise InvalidRule("quorum", str(error)) from None
    rule.updated_at = timezone.now()
    rule.save()
    return rule


@transaction.atomic
def revoke_rule(*, user, rule_id: int) -> None:
    """Delete a rule `user` may change: calls it decided ask (or fall to other rules) again."""
    rule_for_user(user=user, rule_id=rule_id, write=True).delete()


@transaction.atomic
def allow_always(
    *,
    user,
    conversation_id: int,
    agent: str,
    server: str,
    tool: str,
    arguments: dict,
    widen: bool = False,
) -> ApprovalRule | None:
    """Keep the narrowest allow rule for what the person saw ("Always allow"); the same rule
    again is not kept twice. None when none can be written (narrowest_rule_for)."""
    rule = narrowest_rule_for(
        user=user,
        conversation=conversation_id,
        agent=agent,
        server=server,
        tool=tool,
        arguments=arguments,
        widen=widen,
    )
    if rule is None:
        return None
    same = ApprovalRule.objects.filter(
        scope=rule.scope,
        user_id=rule.user_id,
        conversation_id=rule.conversation_id,
        agent=rule.agent,
        server=rule.server,
        tool=rule.tool,
        effect=ALLOW,
        shadow=False,
        expires_at__isnull=True,
        max_uses__isnull=True,
    )
    for existing in same:
        if existing.match == rule.match:
            return existing
    rule.save(force_insert=True)
    return rule


def _check_conversation(user, conversation_id) -> None:
    try:
        conversation_for_user(user=user, conversation_id=conversation_id, need=Need.ACT)
    except (ConversationNotFound, NotAllowed):
        raise InvalidRule("conversationId", str(NO_CONVERSATION)) from None


def _check_expiry(expires_at) -> None:
    if expires_at is not None and expires_at <= timezone.now():
        raise InvalidRule("expiresAt", str(IN_THE_PAST))


# --- What a rule would have done ----------------------------------------------------------------

DRY_RUN_CALLS = 50


@dataclass(frozen=True)
class PastCall:
    """One of the user's past approvals, and what a rule would have done to it."""

    question: Question
    server: str
    tool: str
    arguments: dict
    # What happened: allow, deny, or the row's status (expired, cancelled, pending).
    outcome: str
    # The rule's effect had it been the only rule; None: it does not match.
    would: str | None

    @property
    def arguments_text(self) -> str:
        return json.dumps(self.arguments, ensure_ascii=False)


def dry_run(*, user, rule: ApprovalRule, limit: int = DRY_RUN_CALLS) -> list[PastCall]:
    """What `rule` alone would have done to the user's last `limit` tool approvals (in the
    conversations they own), newest first. Spends nothing, ignores its expiry and uses."""
    candidate = replace(Rule.of(rule), expires_at=None, max_uses=None, uses=0, pk=None)
    rows = Question.objects.filter(
        conversation__owner=user, kind=QuestionKind.TOOL_APPROVAL
    ).order_by("-created_at", "-id")[:limit]
    calls = []
    for question in rows:
        request = question.approval
        decided = question.answers if isinstance(question.answers, dict) else {}
        decision = decided.get("decision")
        outcome = {"always": ALLOW, "allow": ALLOW, "deny": DENY}.get(decision, question.status)
        hits = candidate.matches(
            agent=getattr(request, "agent", None) or "parley",
            server=request.server,
            tool=request.tool,
            arguments=request.arguments,
        )
        calls.append(
            PastCall(
                question=question,
                server=request.server,
                tool=request.tool,
                arguments=request.arguments,
                outcome=outcome,
                would=rule.effect if hits else None,
            )
        )
    return calls
