"""What the three blocks a Question row writes hold: one typed payload per block, stored as the
action block's `extra` under the contract's camelCase names and read back through the same model.

- `question_request` (spec 5.3): what the model asked, and how it was resolved. The contract's
  flat fields (`questionHeader`, `questionText`, …) mirror the first question, and
  `needsUserAction` mirrors the resolution: both are derived when written and ignored when read,
  so they can never disagree with `questions` and `questionResolution`;
- `tool_approval`: may the agent call this tool with these arguments? Allow, Always allow,
  Deny with feedback, or Allow with edited arguments (decided in questions.approvals);
- `elicitation`: a running tool asks for a few typed values (a form built from the JSON schema
  it sent), or asks the person to open a link; answered back as accept (with the values),
  decline or cancel.

Each block is written from its Question row (questions.models.Question.block) when asked and
when resolved. What a tool or an MCP server sent is data: it is shown escaped and never
decides anything.
"""

import hashlib
import json
import math
from datetime import datetime
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, computed_field, model_validator
from pydantic.alias_generators import to_camel

from chat.blocks import ActionBlock, Block
from chat.engine.tools import CallState
from core.text import drop_invisible
from questions.links import Link, safe_link
from questions.schemas import AskedQuestion, Option, ToolName

ACTION_TYPE = "question_request"
APPROVAL_TYPE = "tool_approval"
ELICITATION_TYPE = "elicitation"
# The blocks a Question row writes (its `block`), found in their message by their call id.
ACTION_TYPES = (ACTION_TYPE, APPROVAL_TYPE, ELICITATION_TYPE)

# Block status, and the resolution it shows (spec 5.3; `cancelled`: its turn ended
# some other way while it waited).
PENDING, SUCCESS, DENIED = "pending", "success", "denied"
ASKED, REPLIED, REJECTED, EXPIRED, CANCELLED = (
    "asked",
    "replied",
    "rejected",
    "expired",
    "cancelled",
)
STATUS = {ASKED: PENDING, REPLIED: SUCCESS, REJECTED: DENIED, EXPIRED: DENIED, CANCELLED: DENIED}

Resolution = Literal["asked", "replied", "rejected", "expired", "cancelled"]
# Through which channel a question was resolved (spec 6.1, "Audit"; questions.models.AnsweredVia).
Via = Literal["browser", "api", "terminal", "auto-resolve", "expiry", "email", "rule", "slack"]
BROWSER, API, TERMINAL, AUTO_RESOLVE, EXPIRY, EMAIL, RULE, SLACK = (
    "browser",
    "api",
    "terminal",
    "auto-resolve",
    "expiry",
    "email",
    "rule",
    "slack",
)

# The contract's single-question fields, derived from the first question.
_MIRRORED = {
    "questionHeader": "header",
    "questionText": "question",
    "questionDetails": "details",
    "questionOptions": "options",
    "questionMultiple": "multiSelect",
    "questionCustom": "custom",
    "questionDefault": "default",
}
_DERIVED = {*_MIRRORED, "needsUserAction"}


class Answer(BaseModel):
    """One question's answer: the chosen labels, and typed text if any."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    labels: list[str] = []
    custom: str = ""


class QuestionPayload(BaseModel):
    """Everything a question block holds: what was asked and how it was resolved."""

    model_config = ConfigDict(
        frozen=True,
        extra="forbid",
        alias_generator=to_camel,
        validate_by_name=True,
        serialize_by_alias=True,
    )

    tool_call_id: str
    tool_name: ToolName
    questions: list[AskedQuestion] = Field(min_length=1)
    question_resolution: Resolution = ASKED
    # When replied: the inserted (or auto-resolving) user message, and one answer per question.
    answer_text: str | None = None
    answer_message_id: str | None = None
    answers: list[Answer] | None = None
    # When the server resolves it as expired, fixed when it was asked (None: never).
    expires_at: datetime | None = None
    # Who resolved it (a user name; None when nobody did: it expired), when and through which
    # channel. Questions resolved before these were recorded have none of them.
    answered_by: str | None = None
    answered_at: datetime | None = None
    answered_via: Via | None = None
    # Whom it waits for alone (a user name), if someone assigned it; else everyone who acts.
    assigned_to: str | None = None

    @model_validator(mode="before")
    @classmethod
    def _read_tolerantly(cls, data: Any) -> Any:
        if not isinstance(data, dict):
            return data
        if "questions" not in data and "questionText" in data:
            # A block in the contract's original shape: one question, in the flat fields only,
            # asked by the `question` tool.
            data = {
                "toolName": "question",
                **data,
                "questions": [{v: data[k] for k, v in _MIRRORED.items() if k in data}],
            }
        return {key: value for key, value in data.items() if key not in _DERIVED}

    @property
    def first(self) -> AskedQuestion:
        return self.questions[0]

    @property
    def status(self) -> str:
        return STATUS[self.question_resolution]

    @property
    def is_confirmation(self) -> bool:
        return self.tool_name == "confirm_action"

    @property
    def answered(self) -> list[tuple[AskedQuestion, Answer | None]]:
        """Each question with its answer (None when the answer was an ordinary message)."""
        answers = self.answers or [None] * len(self.questions)
        return list(zip(self.questions, answers, strict=False))

    @computed_field
    def needs_user_action(self) -> bool:
        return self.question_resolution == ASKED

    @computed_field
    def question_header(self) -> str:
        return self.first.header

    @computed_field
    def question_text(self) -> str:
        return self.first.text

    @computed_field
    def question_details(self) -> str:
        return self.first.details

    @computed_field
    def question_options(self) -> list[Option]:
        return self.first.options

    @computed_field
    def question_multiple(self) -> bool:
        return self.first.multiple

    @computed_field
    def question_custom(self) -> bool:
        return self.first.custom

    @computed_field
    def question_default(self) -> str | None:
        return self.first.default


def question_block(payload: QuestionPayload) -> ActionBlock:
    return ActionBlock(
        action_type=ACTION_TYPE,
        status=payload.status,
        extra=payload.model_dump(mode="json", exclude_none=True),
    )


def payload_of(block: Any) -> QuestionPayload | None:
    """The payload of a question block; None for any other block, or one that cannot be read."""
    if not isinstance(block, ActionBlock) or block.action_type != ACTION_TYPE:
        return None
    try:
        return QuestionPayload.model_validate(block.extra)
    except ValueError:
        return None


def replace_block(blocks: list[Block], block: ActionBlock) -> list[Block]:
    """`blocks` (a message's) with the block of the same call as `block`, one of the three a
    Question row writes, replaced by it."""
    call_id = block.extra.get("toolCallId")
    return [
        block
        if isinstance(old, ActionBlock)
        and old.action_type in ACTION_TYPES
        and old.extra.get("toolCallId") == call_id
        else old
        for old in blocks
    ]


# --- What a tool asks: approvals and elicitations ------------------------------------------

# An approval's decision, and an elicitation's answer.
Decision = Literal["allow", "always", "deny"]
ALLOW, ALWAYS, DENY = "allow", "always", "deny"
ElicitAction = Literal["accept", "decline", "cancel"]
ACCEPT, DECLINE, CANCEL = "accept", "decline", "cancel"

# How much of a tool's or server's text a block keeps: enough to decide on, never a page.
MAX_SHOWN_CHARS = 4_000
# How much a person may send back: edited arguments, and each value of a form.
MAX_ARGUMENTS_CHARS = 20_000
MAX_FIELDS = 20


def storable(value: Any) -> Any:
    """JSON from a tool, a model or a client as Parley keeps it: invisible characters dropped
    from every string (core.text.drop_invisible: NUL and lone surrogates, which no database
    column takes, bidi overrides and the like), keys included."""
    if isinstance(value, str):
        return drop_invisible(value)
    if isinstance(value, dict):
        return {drop_invisible(str(key)): storable(item) for key, item in value.items()}
    if isinstance(value, list):
        return [storable(item) for item in value]
    return value


def clip(text: Any, limit: int = MAX_SHOWN_CHARS) -> str:
    """`text` ("" if it is none) cut to `limit` characters, an ellipsis last."""
    text = text if isinstance(text, str) else ""
    return text if len(text) <= limit else text[: limit - 1] + "…"


class _Payload(BaseModel):
    """What an approval's and an elicitation's blocks share: the call, the resolution and the
    audit, as a question block has them."""

    model_config = ConfigDict(
        frozen=True,
        extra="ignore",
        alias_generator=to_camel,
        validate_by_name=True,
        serialize_by_alias=True,
    )

    tool_call_id: str
    question_resolution: Resolution = ASKED
    expires_at: datetime | None = None
    answered_by: str | None = None
    answered_at: datetime | None = None
    answered_via: Via | None = None
    # Whom it waits for alone (a user name), if someone assigned it; else everyone who acts.
    assigned_to: str | None = None

    @property
    def status(self) -> str:
        return STATUS[self.question_resolution]

    @property
    def pending(self) -> bool:
        return self.question_resolution == ASKED


# --- Approvals ---------------------------------------------------------------------------------


class RuleNote(BaseModel):
    """A rule as an approval's block names it: its id (a row's number, or `config:…` for the
    operator's file), whose it is, the text shown for it (its argument globs, else its tool),
    and the uses it had left after this decision (None: unlimited)."""

    model_config = ConfigDict(
        frozen=True,
        extra="ignore",
        alias_generator=to_camel,
        validate_by_name=True,
        serialize_by_alias=True,
    )

    id: str
    scope: Literal["deployment", "user", "conversation"]
    label: str
    # What it decides (a shadow rule: would have decided).
    effect: Literal["allow", "ask", "deny"] = "allow"
    uses_left: int | None = None
    # "Always allow" made it (rather than it deciding the call).
    created: bool = False
    # An ask rule that wants several people's Allow: how many, and who may give it (user
    # names; empty: anyone who may act in the conversation).
    needed: int = 1
    approvers: list[str] = []


# The agent CLIs that ask through their permission hooks, by the names people know them by.
AGENT_NAMES = {"claude-code": "Claude Code", "codex": "Codex"}


class ApprovalRequest(BaseModel):
    """What an approval asks, as stored in the row's `questions` (one item)."""

    model_config = ConfigDict(frozen=True, extra="ignore")

    name: str  # the name the model calls it by (mcp__<server>__<tool>)
    server: str
    tool: str  # the tool's own name on its server
    # The agent that asks: "" for Parley's own; "claude-code" or "codex" for a CLI's
    # permission hook (whose calls have no MCP server: `server` is then "").
    agent: str = ""
    title: str = ""  # the tool's title, else its name
    description: str = ""
    arguments: dict[str, Any] = {}
    input_schema: dict[str, Any] = Field(default_factory=lambda: {"type": "object"})
    # The approval rule that made the call ask (None: no rule, the operator's default did),
    # and the shadow rules that matched it (questions.rules).
    asked_by: RuleNote | None = None
    shadow: list[RuleNote] | None = None
    # A sub-agent's call: the sub-agent's number and title, as its parent shows them.
    subagent_number: int | None = None
    subagent: str = ""

    @property
    def needed(self) -> int:
        """How many people's Allow it needs (the asking rule's quorum; 1 for most)."""
        return self.asked_by.needed if self.asked_by is not None else 1

    @classmethod
    def of(
        cls,
        *,
        name,
        server,
        tool,
        title,
        description,
        arguments,
        input_schema,
        asked_by: RuleNote | None = None,
        shadow: list[RuleNote] | None = None,
        agent: str = "",
    ) -> "ApprovalRequest":
        return cls(
            name=name,
            server=server,
            tool=tool,
            agent=agent,
            title=clip(drop_invisible(title or tool), 200),
            description=clip(drop_invisible(description or "")),
            arguments=storable(arguments) if isinstance(arguments, dict) else {},
            input_schema=storable(input_schema)
            if isinstance(input_schema, dict)
            else {"type": "object"},
            asked_by=asked_by,
            shadow=list(shadow) if shadow else None,
        )


class ApprovalPayload(_Payload):
    """Everything an approval block holds: the call it is about and how it was decided."""

    name: str = ""
    server: str
    tool: str
    agent: str = ""  # see ApprovalRequest.agent
    title: str
    description: str = ""
    arguments: dict[str, Any] = {}
    input_schema: dict[str, Any] = {}
    decision: Decision | None = None
    # The rule that decided it, or that "Always allow" made (questions.rules.RuleNote).
    rule: RuleNote | None = None
    # The rule that made it ask, and the shadow rules that matched it (ApprovalRequest).
    asked_by: RuleNote | None = None
    shadow: list[RuleNote] | None = None
    # The arguments the person allowed instead of the model's (None: not edited).
    edited_arguments: dict[str, Any] | None = None
    feedback: str = ""
    # Why an agent outside Parley stopped waiting (questions.approvals.ENDED_*), if it did.
    ended: str = ""
    # The title of the call of the same step whose deny denied this one with it (the
    # conversation's "a deny stops the step"), if that is how it was denied.
    stopped_by: str = ""
    # Who allowed it so far, when its rule wants several people's Allow (asked_by.needed).
    votes: list[str] = []
    # See ApprovalRequest.subagent_number and .subagent.
    subagent_number: int | None = None
    subagent: str = ""

    @property
    def needed(self) -> int:
        """How many people's Allow it needs (its rule's quorum; 1 for most)."""
        return self.asked_by.needed if self.asked_by is not None else 1

    @property
    def arguments_digest(self) -> str:
        """What "Allow all" binds a decision to: these exact arguments (a changed call, or
        another one, does not inherit it)."""
        return arguments_digest(self.arguments)

    @property
    def agent_name(self) -> str:
        """The asking agent CLI's name as people know it."""
        return AGENT_NAMES.get(self.agent, self.agent)

    @property
    def arguments_json(self) -> str:
        return pretty(self.arguments)

    @property
    def edited_json(self) -> str:
        return pretty(self.edited_arguments) if self.edited_arguments is not None else ""


def arguments_digest(arguments: dict[str, Any]) -> str:
    canonical = json.dumps(arguments, sort_keys=True, ensure_ascii=False, separators=(",", ":"))
    return hashlib.sha256(canonical.encode()).hexdigest()[:32]


def pretty(value: Any) -> str:
    return json.dumps(value, indent=2, ensure_ascii=False, sort_keys=False)


def approval_block(payload: ApprovalPayload) -> ActionBlock:
    return ActionBlock(
        action_type=APPROVAL_TYPE,
        status=payload.status,
        extra=payload.model_dump(mode="json", exclude_none=True),
    )


# --- Elicitations ------------------------------------------------------------------------------


class Choice(BaseModel):
    model_config = ConfigDict(frozen=True)

    value: str
    title: str


# A string field allowed more characters than this (or any number) is long text: a textarea.
LONG_TEXT = 200
# The string formats a form's field hint names (templates/questions/elicitation.html).
FORMATS_SAID = ("email", "uri", "date", "date-time")


class FormField(BaseModel):
    """One form field, read from a property of the requested schema (the flat subset MCP
    allows: string, number, integer, boolean, a string enum, and an array of a string enum's
    values: kind "array", a multi-select whose `choices` are its items)."""

    model_config = ConfigDict(
        frozen=True, alias_generator=to_camel, validate_by_name=True, serialize_by_alias=True
    )

    name: str
    kind: Literal["string", "number", "integer", "boolean", "enum", "array"]
    title: str
    description: str = ""
    required: bool = False
    default: Any = None
    minimum: float | None = None
    maximum: float | None = None
    min_length: int | None = None
    max_length: int | None = None
    format: str = ""
    choices: list[Choice] = []
    # How many of its choices an array takes (None: no limit given).
    min_items: int | None = None
    max_items: int | None = None

    @property
    def label(self) -> str:
        return self.title or self.name

    @property
    def long_text(self) -> bool:
        """Prose rather than a value: a string with no format and no short length limit gets
        a textarea (a limit of more than LONG_TEXT characters, or none)."""
        return (
            self.kind == "string"
            and not self.format
            and (self.max_length is None or self.max_length > LONG_TEXT)
        )

    @property
    def has_limits(self) -> bool:
        """Whether the form says what the field takes beyond its label (a number always has
        a kind to say; a string, its format or its length limits; an array, how many)."""
        if self.kind in ("number", "integer"):
            return True
        if self.kind == "array":
            return self.min_items is not None or self.max_items is not None
        return self.kind == "string" and bool(
            self.format in FORMATS_SAID
            or self.min_length is not None
            or self.max_length is not None
        )

    @property
    def shown_minimum(self) -> str:
        return "" if self.minimum is None else f"{self.minimum:g}"

    @property
    def shown_maximum(self) -> str:
        return "" if self.maximum is None else f"{self.maximum:g}"


def form_fields(schema: Any, order: list[str] | tuple = ()) -> list[FormField]:
    """The fields of a requested schema, in the server's order (`order`: as it sent them, which
    a stored schema may not keep: PostgreSQL's jsonb sorts keys); properties of other types
    are left out (the server's own validation then refuses what it needed)."""
    if not isinstance(schema, dict) or not isinstance(schema.get("properties"), dict):
        return []
    required = (
        set(schema.get("required") or ()) if isinstance(schema.get("required"), list) else set()
    )
    properties = schema["properties"]
    names = [n for n in order if n in properties] + [n for n in properties if n not in order]
    fields = []
    for name, spec in [(n, properties[n]) for n in names][:MAX_FIELDS]:
        if isinstance(name, str) and isinstance(spec, dict):
            field = _form_field(name, spec, required=name in required)
            if field is not None:
                fields.append(field)
    return fields


def _form_field(name: str, spec: dict, *, required: bool) -> FormField | None:
    """The field a property asks for; None for a kind a form cannot offer (an array whose
    items are not string choices, an object, a type it does not name)."""
    kind = spec.get("type")
    if kind == "array":
        items = spec.get("items")
        choices = _choices(items) if isinstance(items, dict) else []
        if not choices:
            return None
        offered = {c.value for c in choices}
        default = spec.get("default")
        default = (
            list(dict.fromkeys(v for v in default if isinstance(v, str) and v in offered))
            if isinstance(default, list)
            else None
        )
    else:
        choices = _choices(spec)
        kind = "enum" if choices else kind
        default = _scalar(spec.get("default"))
    if kind not in ("string", "number", "integer", "boolean", "enum", "array"):
        return None
    return FormField(
        name=clip(name, 100),
        kind=kind,
        title=clip(spec.get("title"), 200),
        description=clip(spec.get("description"), 1000),
        required=required,
        default=default,
        minimum=_number(spec.get("minimum")),
        maximum=_number(spec.get("maximum")),
        min_length=_count(spec.get("minLength")),
        max_length=_count(spec.get("maxLength")),
        format=clip(spec.get("format"), 40),
        choices=choices,
        min_items=_count(spec.get("minItems")) if kind == "array" else None,
        max_items=_count(spec.get("maxItems")) if kind == "array" else None,
    )


def _choices(spec: dict) -> list[Choice]:
    for key in ("oneOf", "anyOf"):  # titled choices: [{"const", "title"}], either keyword
        if isinstance(spec.get(key), list):
            return [
                Choice(value=str(c["const"]), title=clip(c.get("title") or str(c["const"]), 200))
                for c in spec[key]
                if isinstance(c, dict) and isinstance(c.get("const"), str)
            ]
    if isinstance(spec.get("enum"), list):
        names = spec.get("enumNames") if isinstance(spec.get("enumNames"), list) else []
        return [
            Choice(
                value=v,
                title=clip(names[i] if i < len(names) and isinstance(names[i], str) else v, 200),
            )
            for i, v in enumerate(spec["enum"])
            if isinstance(v, str)
        ]
    return []


def _scalar(value: Any) -> Any:
    return value if isinstance(value, str | int | float | bool) else None


def _number(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        return None
    return value


def _count(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else None


class ElicitationRequest(BaseModel):
    """What an elicitation asks, as stored in the row's `questions` (one item)."""

    model_config = ConfigDict(frozen=True, extra="ignore")

    server: str
    # The tool call that is running and asked.
    call_id: str
    tool: str = ""
    message: str
    mode: Literal["form", "url"] = "form"
    requested_schema: dict[str, Any] = {}
    # The schema's properties in the order the server sent them (see form_fields).
    order: list[str] = []
    url: str = ""
    # Asked in an input-required round (MCP 2026-07-28; mcp_client.inputs): the round's
    # number, the server's key for this request, and its opaque state (never shown).
    round: int = 0
    input_key: str = ""
    request_state: str | None = None

    @model_validator(mode="after")
    def _keep_order(self) -> "ElicitationRequest":
        properties = self.requested_schema.get("properties")
        if not self.order and isinstance(properties, dict):
            object.__setattr__(self, "order", [str(name) for name in properties])
        return self


class ElicitationPayload(_Payload):
    server: str
    call_id: str
    tool: str = ""
    message: str
    mode: Literal["form", "url"] = "form"
    fields: list[FormField] = []
    url: str = ""
    action: ElicitAction | None = None
    content: dict[str, Any] | None = None

    @property
    def link(self) -> Link | None:
        """The link to show and open (questions.links); None: none may be shown."""
        return safe_link(self.url) if self.mode == "url" else None


def elicitation_block(payload: ElicitationPayload) -> ActionBlock:
    return ActionBlock(
        action_type=ELICITATION_TYPE,
        status=payload.status,
        extra=payload.model_dump(mode="json", exclude_none=True),
    )


def approval_call_state(blocks: list[Block], call_id: str) -> CallState | None:
    """What the approval of the call `call_id` among a message's `blocks` says of it (chat's
    tool cards: chat.engine.tools.register_call_state): waiting for the person's decision, or
    denied; None when no approval decides it or it was allowed (its result says the rest)."""
    for block in blocks:
        if not isinstance(block, ActionBlock) or block.action_type != APPROVAL_TYPE:
            continue
        if block.extra.get("toolCallId") != call_id:
            continue
        try:
            approval = ApprovalPayload.model_validate(block.extra)
        except ValueError:
            return None
        if approval.pending:
            state = "waiting"
        elif approval.question_resolution == REJECTED:
            state = "denied"
        else:
            return None
        return CallState(state=state, title=approval.title, source=approval.server)
    return None
