"""The question_request block (seed 000's contract, spec 5.3) and reading it back."""

from typing import Any

from pydantic import BaseModel, ConfigDict

from chat.blocks import ActionBlock
from questions.schemas import Option, Question, QuestionRequest

ACTION_TYPE = "question_request"

# status -> resolution, as seed 000 maps them.
PENDING, SUCCESS, DENIED = "pending", "success", "denied"
ASKED, REPLIED, REJECTED = "asked", "replied", "rejected"


class Answer(BaseModel):
    """One question's answer: the chosen labels, and typed text if any."""

    model_config = ConfigDict(frozen=True)

    labels: list[str] = []
    custom: str = ""


def question_block(*, tool_call_id: str, request: QuestionRequest) -> ActionBlock:
    first = request.questions[0]
    extra: dict[str, Any] = {
        "toolCallId": tool_call_id,
        "toolName": request.tool,
        "questionHeader": first.header,
        "questionText": first.text,
        "questionDetails": first.details,
        "questionOptions": [o.model_dump() for o in first.options],
        "questionMultiple": first.multiple,
        "questionCustom": first.custom,
        "questionDefault": first.default,
        "questions": [
            {
                "header": q.header,
                "question": q.text,
                "details": q.details,
                "options": [o.model_dump() for o in q.options],
                "multiSelect": q.multiple,
                "custom": q.custom,
                "default": q.default,
            }
            for q in request.questions
        ],
        "questionResolution": ASKED,
        "needsUserAction": True,
    }
    return ActionBlock(action_type=ACTION_TYPE, status=PENDING, extra=extra)


def resolved_block(
    block: ActionBlock,
    *,
    replied: bool,
    answer_text: str = "",
    answer_message_id: int | None = None,
    answers: list[Answer] | None = None,
) -> ActionBlock:
    extra = {**block.extra, "needsUserAction": False}
    if replied:
        extra.update(
            questionResolution=REPLIED,
            answerText=answer_text,
            answers=[a.model_dump() for a in answers or []],
        )
        if answer_message_id is not None:
            extra["answerMessageId"] = str(answer_message_id)
    else:
        extra["questionResolution"] = REJECTED
    return ActionBlock(action_type=ACTION_TYPE, status=SUCCESS if replied else DENIED, extra=extra)


def is_question_block(block) -> bool:
    return isinstance(block, ActionBlock) and block.action_type == ACTION_TYPE


def request_of(block: ActionBlock) -> QuestionRequest:
    """The request stored in a question block."""
    return QuestionRequest(
        tool=block.extra["toolName"],
        questions=[
            Question(
                header=q.get("header", ""),
                text=q["question"],
                details=q.get("details", ""),
                options=[Option(**o) for o in q.get("options", [])],
                multiple=q.get("multiSelect", False),
                custom=q.get("custom", True),
                default=q.get("default"),
            )
            for q in block.extra["questions"]
        ],
    )
