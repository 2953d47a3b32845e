"""The two pausing blocks that a tool, not the model's own words, puts before a person:

- an approval (`tool_approval`): may the agent call this tool with these arguments? Allow,
  Always allow, Deny with feedback, or Allow with edited arguments;
- an elicitation (`elicitation`): a running tool asks for a few typed values (a form built
  from the JSON schema it sent), or asks the person to open a link; answered back as accept
  (with the values), decline or cancel.

Each is a Question row of its own kind, like the questions the model asks (the inbox, the
count, deadlines and the audit read it), and its block is stored under the call's message,
rewritten from the row on every resolution. What a tool or an MCP server sent is data: it is
shown escaped and never decides anything.
"""

import json
import math
from datetime import datetime
from typing import Any, Literal

from django.utils.translation import gettext_lazy as _
from pydantic import BaseModel, ConfigDict, Field, model_validator
from pydantic.alias_generators import to_camel

from chat.blocks import ActionBlock
from core.text import drop_invisible
from questions.blocks import ASKED, STATUS, Resolution, Via
from questions.errors import NestedTooDeeply
from questions.links import Link, safe_link
from questions.tool_input import (
    UncheckablePattern,
    nesting_depth,
    schema_error,
    text_nesting_depth,
)

APPROVAL_TYPE = "tool_approval"
ELICITATION_TYPE = "elicitation"

Decision = Literal["allow", "always", "deny"]
ALLOW, ALWAYS, DENY = "allow", "always", "deny"
ElicitAction = Literal["accept", "decline", "cancel"]
ACCEPT, DECLINE, CANCEL = "accept", "decline", "cancel"

# How much of a tool's or server's text a block keeps: enough to decide on, never a page.
MAX_SHOWN_CHARS = 4_000
MAX_ARGUMENTS_CHARS = 20_000
# Levels of arrays and objects in edited arguments, the arguments object itself included.
MAX_ARGUMENTS_DEPTH = 32
MAX_FEEDBACK_CHARS = 2_000
MAX_FIELDS = 20

BAD_JSON = _("The arguments are not valid JSON: %(error)s")
NOT_AN_OBJECT = _("The arguments must be a JSON object.")
SCHEMA_MISMATCH = _("The arguments do not fit the tool's input schema: %(error)s")
PATTERN_UNCHECKABLE = _(
    "Parley cannot check edited arguments against this tool's input schema: its pattern "
    "%(pattern)s could take too long to match. Allow the call as the agent made it, or deny it."
)
ARGUMENTS_TOO_LONG = _("The arguments are too long.")
ARGUMENTS_TOO_DEEP = _(
    "The arguments nest arrays and objects too deeply: at most %(limit)s levels."
)
FEEDBACK_TOO_LONG = _("The feedback is too long.")
FIELD_REQUIRED = _("%(field)s is required.")
FIELD_NOT_NUMBER = _("%(field)s must be a number.")
FIELD_NOT_INTEGER = _("%(field)s must be a whole number.")
FIELD_TOO_SMALL = _("%(field)s must be at least %(limit)s.")
FIELD_TOO_LARGE = _("%(field)s must be at most %(limit)s.")
FIELD_TOO_SHORT = _("%(field)s must be at least %(limit)s characters long.")
FIELD_TOO_LONG = _("%(field)s must be at most %(limit)s characters long.")
FIELD_NOT_A_CHOICE = _("Pick one of the choices for %(field)s.")


class InvalidInput(ValueError):
    """What a person entered cannot be used; the message says why (translated)."""


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


def _clip(text: Any, limit: int = MAX_SHOWN_CHARS) -> str:
    text = text if isinstance(text, str) else ""
    return text if len(text) <= limit else text[: limit - 1] + "…"


class _Payload(BaseModel):
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


class ApprovalRequest(BaseModel):
    """What an approval asks, as stored in the row's `questions` (one item)."""

    model_config = ConfigDict(frozen=True, extra="ignore")

    name: str  # the name the model calls it by (mcp__<server>__<tool>)
    server: str
    tool: str  # the tool's own name on its server
    title: str = ""  # the tool's title, else its name
    description: str = ""
    arguments: dict[str, Any] = {}
    input_schema: dict[str, Any] = Field(default_factory=lambda: {"type": "object"})

    @classmethod
    def of(
        cls, *, name, server, tool, title, description, arguments, input_schema
    ) -> "ApprovalRequest":
        return cls(
            name=name,
            server=server,
            tool=tool,
            title=_clip(drop_invisible(title or tool), 200),
            description=_clip(drop_invisible(description or "")),
            arguments=storable(arguments) if isinstance(arguments, dict) else {},
            input_schema=storable(input_schema)
            if isinstance(input_schema, dict)
            else {"type": "object"},
        )


class ApprovalPayload(_Payload):
    """Everything an approval block holds: the call it is about and how it was decided."""

    name: str = ""
    server: str
    tool: str
    title: str
    description: str = ""
    arguments: dict[str, Any] = {}
    input_schema: dict[str, Any] = {}
    decision: Decision | None = None
    # The arguments the person allowed instead of the model's (None: not edited).
    edited_arguments: dict[str, Any] | None = None
    feedback: str = ""

    @property
    def arguments_json(self) -> str:
        return pretty(self.arguments)

    @property
    def edited_json(self) -> str:
        return pretty(self.edited_arguments) if self.edited_arguments is not None else ""


def pretty(value: Any) -> str:
    return json.dumps(value, indent=2, ensure_ascii=False, sort_keys=False)


def approval_block(payload: ApprovalPayload) -> ActionBlock:
    return ActionBlock(
        action_type=APPROVAL_TYPE,
        status=payload.status,
        extra=payload.model_dump(mode="json", exclude_none=True),
    )


def parse_arguments(text: str, schema: dict) -> dict:
    """Edited arguments, as typed: a JSON object valid against the tool's input schema.
    Raises InvalidInput saying what is wrong, NestedTooDeeply past MAX_ARGUMENTS_DEPTH."""
    if len(text) > MAX_ARGUMENTS_CHARS:
        raise InvalidInput(ARGUMENTS_TOO_LONG)
    if text_nesting_depth(text) > MAX_ARGUMENTS_DEPTH:
        raise NestedTooDeeply(ARGUMENTS_TOO_DEEP % {"limit": MAX_ARGUMENTS_DEPTH})
    try:
        value = json.loads(text)
    except ValueError as error:
        raise InvalidInput(BAD_JSON % {"error": error}) from None
    if not isinstance(value, dict):
        raise InvalidInput(NOT_AN_OBJECT)
    return edited_arguments(value, schema)


def edited_arguments(value: dict, schema: dict) -> dict:
    """Edited arguments given as an object, as Parley keeps them (storable), checked as
    parse_arguments checks them."""
    if nesting_depth(value, limit=MAX_ARGUMENTS_DEPTH) > MAX_ARGUMENTS_DEPTH:
        raise NestedTooDeeply(ARGUMENTS_TOO_DEEP % {"limit": MAX_ARGUMENTS_DEPTH})
    value = storable(value)
    check_arguments(value, schema)
    return value


def check_arguments(value: dict, schema: dict) -> None:
    """Raises InvalidInput when `value` does not fit `schema` or cannot be checked against it
    in bounded time (questions.tool_input); a broken schema checks nothing."""
    try:
        error = schema_error(value, schema)
    except UncheckablePattern as refused:
        raise InvalidInput(PATTERN_UNCHECKABLE % {"pattern": _clip(refused.pattern, 200)}) from None
    if error is not None:
        where = "/".join(str(p) for p in error.absolute_path)
        raise InvalidInput(
            SCHEMA_MISMATCH % {"error": f"{where}: {error.message}" if where else error.message}
        )


# --- Elicitations ------------------------------------------------------------------------------


class Choice(BaseModel):
    model_config = ConfigDict(frozen=True)

    value: str
    title: str


class FormField(BaseModel):
    """One form field, read from a property of the requested schema (the flat subset MCP
    allows: string, number, integer, boolean, and a string enum)."""

    model_config = ConfigDict(
        frozen=True, alias_generator=to_camel, validate_by_name=True, serialize_by_alias=True
    )

    name: str
    kind: Literal["string", "number", "integer", "boolean", "enum"]
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

    @property
    def label(self) -> str:
        return self.title or self.name


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
        if not isinstance(name, str) or not isinstance(spec, dict):
            continue
        kind = spec.get("type")
        choices = _choices(spec)
        if choices:
            kind = "enum"
        if kind not in ("string", "number", "integer", "boolean", "enum"):
            continue
        fields.append(
            FormField(
                name=_clip(name, 100),
                kind=kind,
                title=_clip(spec.get("title"), 200),
                description=_clip(spec.get("description"), 1000),
                required=name in required,
                default=_scalar(spec.get("default")),
                minimum=_number(spec.get("minimum")),
                maximum=_number(spec.get("maximum")),
                min_length=_count(spec.get("minLength")),
                max_length=_count(spec.get("maxLength")),
                format=_clip(spec.get("format"), 40),
                choices=choices,
            )
        )
    return fields


def _choices(spec: dict) -> list[Choice]:
    if isinstance(spec.get("oneOf"), list):  # titled choices: [{"const", "title"}]
        return [
            Choice(value=str(c["const"]), title=_clip(c.get("title") or str(c["const"]), 200))
            for c in spec["oneOf"]
            if isinstance(c, dict) and isinstance(c.get("const"), str)
        ]
    if isinstance(spec.get("enum"), list):
        names = spec.get("enumNames") if isinstance(spec.get("enumNames"), list) else []
        return [
            Choice(
                value=v,
                title=_clip(names[i] if i < len(names) and isinstance(names[i], str) else v, 200),
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


def form_values(fields: list[FormField], given: dict[str, Any]) -> dict[str, Any]:
    """The content to send back for an accepted form: each field's value from `given` (form
    strings, or JSON values from the API), converted to its type and checked against its
    limits. Raises InvalidInput naming the field."""
    content: dict[str, Any] = {}
    for field in fields:
        raw = given.get(field.name)
        label = field.label
        if field.kind == "boolean":
            content[field.name] = raw in (True, "true", "on", "1", 1)
            continue
        if raw is None or (isinstance(raw, str) and not raw.strip()):
            if field.required:
                raise InvalidInput(FIELD_REQUIRED % {"field": label})
            continue
        if field.kind in ("number", "integer"):
            content[field.name] = _to_number(field, raw)
        elif field.kind == "enum":
            if str(raw) not in {c.value for c in field.choices}:
                raise InvalidInput(FIELD_NOT_A_CHOICE % {"field": label})
            content[field.name] = str(raw)
        else:
            text = drop_invisible(str(raw))
            if field.min_length is not None and len(text) < field.min_length:
                raise InvalidInput(FIELD_TOO_SHORT % {"field": label, "limit": field.min_length})
            if field.max_length is not None and len(text) > field.max_length:
                raise InvalidInput(FIELD_TOO_LONG % {"field": label, "limit": field.max_length})
            if len(text) > MAX_ARGUMENTS_CHARS:
                raise InvalidInput(FIELD_TOO_LONG % {"field": label, "limit": MAX_ARGUMENTS_CHARS})
            content[field.name] = text
    return content


def _to_number(field: FormField, raw: Any) -> int | float:
    label = field.label
    try:
        number = float(raw) if not isinstance(raw, int | float) or isinstance(raw, bool) else raw
    except ValueError:
        raise InvalidInput(FIELD_NOT_NUMBER % {"field": label}) from None
    if isinstance(raw, bool) or not math.isfinite(number):
        raise InvalidInput(FIELD_NOT_NUMBER % {"field": label})
    if field.kind == "integer":
        if number != int(number):
            raise InvalidInput(FIELD_NOT_INTEGER % {"field": label})
        number = int(number)
    if field.minimum is not None and number < field.minimum:
        raise InvalidInput(FIELD_TOO_SMALL % {"field": label, "limit": _plain(field.minimum)})
    if field.maximum is not None and number > field.maximum:
        raise InvalidInput(FIELD_TOO_LARGE % {"field": label, "limit": _plain(field.maximum)})
    return number


def _plain(number: float) -> str:
    return str(int(number)) if number == int(number) else str(number)


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
