"""The three question tools' inputs, validated at the boundary, and the one request they all
normalise into.

Tool-provided strings are plain text: they are cleaned of invisible characters (core.text) and
always shown escaped, never as HTML or markdown. The normalised `AskedQuestion` is also what the
question block stores and the API returns, under the contract's wire names (spec 5.3).
"""

from typing import Annotated, Literal

from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    model_validator,
)

from core.text import clean_text

TOOL_QUESTION = "question"
TOOL_ASK_USER_QUESTION = "ask_user_question"
TOOL_CONFIRM_ACTION = "confirm_action"
QUESTION_TOOL_NAMES = (TOOL_QUESTION, TOOL_ASK_USER_QUESTION, TOOL_CONFIRM_ACTION)

YES = "Yes"
NO = "No"


def _line(value: str) -> str:
    return clean_text(value)


def _lines(value: str) -> str:
    return clean_text(value, multiline=True)


def _required(value: str) -> str:
    if not value:
        raise ValueError("must not be empty (after removing invisible characters)")
    return value


Line = Annotated[str, AfterValidator(_line)]
Lines = Annotated[str, AfterValidator(_lines)]


def limited(max_length: int, *, required: bool = False, multiline: bool = False):
    """A cleaned string whose cleaned length is at most `max_length`."""

    def check(value: str) -> str:
        if required:
            _required(value)
        if len(value) > max_length:
            raise ValueError(f"must be at most {max_length} characters (got {len(value)})")
        return value

    base = Lines if multiline else Line
    return Annotated[base, AfterValidator(check)]


class _Input(BaseModel):
    model_config = ConfigDict(extra="forbid", str_max_length=10_000)


def _unique(values: list[str], what: str) -> None:
    seen: set[str] = set()
    for value in values:
        key = value.casefold()
        if key in seen:
            raise ValueError(f"{what} must be unique; {value!r} appears twice")
        seen.add(key)


# --- question -------------------------------------------------------------------------------


class QuestionOption(_Input):
    label: limited(30, required=True) = Field(description="Button text; also the answer sent.")
    description: limited(200) = Field(default="", description="Helper text under the label.")


class QuestionInput(_Input):
    header: limited(30) = Field(default="", description="A short label for the question.")
    question: limited(500, required=True, multiline=True) = Field(description="The full question.")
    options: list[QuestionOption] = Field(
        default_factory=list, max_length=10, description="0-10 choices; none for a free answer."
    )
    multiple: bool = Field(default=False, description="Allow choosing several options.")
    custom: bool = Field(default=True, description="Allow typing an answer of one's own.")

    @model_validator(mode="after")
    def consistent(self):
        _unique([o.label for o in self.options], "option labels")
        if not self.options and not self.custom:
            raise ValueError("a question without options must allow a custom answer")
        if self.multiple and not self.options:
            raise ValueError("multiple needs options to choose from")
        return self


# --- ask_user_question ----------------------------------------------------------------------


class AskOption(_Input):
    label: limited(60, required=True)
    description: limited(200) = ""


class AskQuestion(_Input):
    question: limited(500, required=True, multiline=True)
    header: limited(12) = ""
    options: list[AskOption] = Field(min_length=2, max_length=4)
    multiSelect: bool = False  # the seeds' wire name

    @model_validator(mode="after")
    def unique_labels(self):
        _unique([o.label for o in self.options], "option labels")
        return self


class AskUserQuestionInput(_Input):
    questions: list[AskQuestion] = Field(min_length=1, max_length=4)

    @model_validator(mode="after")
    def unique_questions(self):
        _unique([q.question for q in self.questions], "question texts")
        return self


# --- confirm_action -------------------------------------------------------------------------


class ConfirmActionInput(_Input):
    action: limited(500, required=True, multiline=True) = Field(
        description="What will happen if the user confirms."
    )
    details: limited(2000, multiline=True) = Field(
        default="", description="Consequences worth knowing."
    )
    default: bool = Field(default=True, description="The answer selected by default.")
    dangerous: bool = Field(
        default=True,
        description="Whether the action is destructive or hard to undo (shown as a warning).",
    )


# --- The one internal request -----------------------------------------------------------------


class _Stored(BaseModel):
    """Read and written under the wire names (aliases); built in Python by field name."""

    model_config = ConfigDict(
        frozen=True, extra="forbid", validate_by_name=True, serialize_by_alias=True
    )


class Option(_Stored):
    label: str
    description: str = ""


class AskedQuestion(_Stored):
    """One question as asked, whichever tool asked it: what the Question row stores (in its
    `questions`), the question block holds and the API returns (its schema `Question`)."""

    header: str = ""
    text: str = Field(alias="question")
    details: str = ""
    options: list[Option] = []
    multiple: bool = Field(default=False, alias="multiSelect")
    custom: bool = True
    default: str | None = None
    # A confirmation of something destructive or hard to undo: its Yes is styled as a danger.
    # Stored only when set, so questions stored before it read the same.
    dangerous: bool = Field(default=False, exclude_if=lambda value: not value)

    @property
    def labels(self) -> list[str]:
        return [option.label for option in self.options]


ToolName = Literal["question", "ask_user_question", "confirm_action"]


class QuestionRequest(_Stored):
    tool: ToolName
    questions: list[AskedQuestion] = Field(min_length=1)


def normalise(tool: str, arguments: object) -> QuestionRequest:
    """Validate a question tool call's arguments. Raises ValueError with a readable message."""
    try:
        if tool == TOOL_QUESTION:
            data = QuestionInput.model_validate(arguments)
            questions = [
                AskedQuestion(
                    header=data.header,
                    text=data.question,
                    options=[
                        Option(label=o.label, description=o.description) for o in data.options
                    ],
                    multiple=data.multiple,
                    custom=data.custom,
                )
            ]
        elif tool == TOOL_ASK_USER_QUESTION:
            data = AskUserQuestionInput.model_validate(arguments)
            questions = [
                AskedQuestion(
                    header=q.header,
                    text=q.question,
                    options=[Option(label=o.label, description=o.description) for o in q.options],
                    multiple=q.multiSelect,
                    custom=True,
                )
                for q in data.questions
            ]
        elif tool == TOOL_CONFIRM_ACTION:
            data = ConfirmActionInput.model_validate(arguments)
            questions = [
                AskedQuestion(
                    text=data.action,
                    details=data.details,
                    options=[Option(label=YES), Option(label=NO)],
                    custom=False,
                    default=YES if data.default else NO,
                    dangerous=data.dangerous,
                )
            ]
        else:
            raise ValueError(f"{tool!r} is not a question tool")
    except ValidationError as error:
        raise ValueError(describe(error)) from None
    return QuestionRequest(tool=tool, questions=questions)


def describe(error: ValidationError) -> str:
    """A short, model-readable account of what was wrong."""
    problems = []
    for item in error.errors(include_url=False):
        where = ".".join(str(part) for part in item["loc"]) or "input"
        message = item["msg"].removeprefix("Value error, ")
        problems.append(f"{where}: {message}")
    return "; ".join(problems[:8])
