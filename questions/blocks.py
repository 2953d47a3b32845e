"""The question_request block (spec 5.3): one typed payload, stored as the action block's
`extra` under the contract's camelCase names, and read back through the same model.

The contract's flat fields (`questionHeader`, `questionText`, …) mirror the first question, and
`needsUserAction` mirrors the resolution: both are derived when written and ignored when read,
so they can never disagree with `questions` and `questionResolution`.
"""

from datetime import datetime
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, computed_field, model_validator
from pydantic.alias_generators import to_camel

from chat.blocks import ActionBlock
from questions.schemas import Option, Question, ToolName

ACTION_TYPE = "question_request"

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
Via = Literal["browser", "api", "terminal", "auto-resolve", "expiry", "email"]
BROWSER, API, TERMINAL, AUTO_RESOLVE, EXPIRY, EMAIL = (
    "browser",
    "api",
    "terminal",
    "auto-resolve",
    "expiry",
    "email",
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
    questions: list[Question] = Field(min_length=1)
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
    def first(self) -> Question:
        return self.questions[0]

    @property
    def status(self) -> str:
        return STATUS[self.question_resolution]

    @property
    def is_confirmation(self) -> bool:
        return self.tool_name == "confirm_action"

    @property
    def answered(self) -> list[tuple[Question, Answer | None]]:
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
