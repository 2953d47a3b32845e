"""What an answer says, without writing anything: an answer checked against its question
(`validated`), mapped from {question text: value} (`answers_by_question_text`), and what it
reads as: the user message it inserts, the seeds' `answers` object, what the model receives
(also when nobody answers: declined, expired); a draft as it is kept; an ordinary message's
text as an answer (`reply_text`); a running tool's form filled in (`form_values`)."""

import json
import math
from typing import Any

from django.conf import settings
from django.utils.translation import gettext_lazy as _
from django.utils.translation import gettext_noop, ngettext_lazy

from chat.blocks import TextBlock
from chat.models import Message
from core.text import clean_text, drop_invisible
from questions.errors import DraftTooLong, InvalidAnswer
from questions.payloads import MAX_ARGUMENTS_CHARS, Answer, FormField, clip
from questions.schemas import (
    TOOL_ASK_USER_QUESTION,
    TOOL_CONFIRM_ACTION,
    TOOL_QUESTION,
    YES,
    QuestionRequest,
)

NOT_AN_OPTION = _("Pick one of the options shown.")
ONE_CHOICE = _("This question takes a single choice.")
CHOICE_OR_TYPED = _("Choose an option or send your own answer, not both.")
OPTIONS_ONLY = _("This question takes one of its options, not a typed answer.")
TOO_LONG = _("That answer is too long.")
EMPTY = _("Choose an option or type an answer first.")
TOO_MANY_ANSWERS = _("There are more answers than questions.")
NO_SUCH_QUESTION = _("No such question: %(text)s")
MISSING_ANSWER = _("Missing an answer to: %(text)s")
# A decision, or an elicitation's action, that is none of those offered.
APPROVALS_PENDING = gettext_noop("Decide every tool call the agent asked to make.")
FIELD_REQUIRED = _("%(field)s is required.")
FIELD_NOT_NUMBER = _("%(field)s must be a number.")
FIELD_NOT_INTEGER = _("%(field)s must be a whole number.")
FIELD_TOO_SMALL = _("%(field)s must be at least %(limit)s.")
FIELD_TOO_LARGE = _("%(field)s must be at most %(limit)s.")
FIELD_TOO_SHORT = _("%(field)s must be at least %(limit)s characters long.")
FIELD_TOO_LONG = _("%(field)s must be at most %(limit)s characters long.")
FIELD_NOT_A_CHOICE = _("Pick one of the choices for %(field)s.")
FIELD_NOT_CHOICES = _("%(field)s takes a list of its choices.")
FIELD_UNKNOWN_CHOICE = _("%(value)s is not one of the choices for %(field)s.")
FIELD_REPEATED_CHOICE = _("%(value)s is chosen more than once for %(field)s.")
FIELD_TOO_FEW = ngettext_lazy(
    "%(field)s takes at least %(limit)s choice.",
    "%(field)s takes at least %(limit)s choices.",
    "limit",
)
FIELD_TOO_MANY = ngettext_lazy(
    "%(field)s takes at most %(limit)s choice.",
    "%(field)s takes at most %(limit)s choices.",
    "limit",
)

# What the model reads when the user rejects its question, and for calls it made after it.
DECLINED = "The user declined to answer this question."
NOT_RUN_AFTER_DECLINE = "Not run: the user declined the question asked before this call."
# ... and when nobody answered in time.
EXPIRED_RESULT = (
    "The user did not answer this question in time: it expired. Proceed with your best "
    "judgement, and state the assumptions you make."
)


def answers_by_question_text(
    request: QuestionRequest, given: dict[str, str | list[str]]
) -> list[Answer]:
    """Map {question text: label, typed text or list of labels} onto the questions, in order;
    a value that is not one of the question's labels is typed text."""
    unknown = set(given) - {q.text for q in request.questions}
    if unknown:
        raise InvalidAnswer(NO_SUCH_QUESTION % {"text": sorted(unknown)[0]})
    answers = []
    for question in request.questions:
        if question.text not in given:
            raise InvalidAnswer(MISSING_ANSWER % {"text": question.text})
        value = given[question.text]
        values = value if isinstance(value, list) else [value]
        labels = [v for v in values if v in question.labels]
        typed = [v for v in values if v not in question.labels]
        answers.append(Answer(labels=labels, custom="\n".join(typed)))
    return answers


def answer_text(request: QuestionRequest, answers: list[Answer]) -> str:
    """The user message an answer inserts (spec 5.5): labels one per line, typed text last;
    with several questions, one line per question."""

    def parts(question, answer: Answer) -> list[str]:
        if answer.custom and not question.multiple:
            return [answer.custom]  # single choice: typed text is the answer on its own
        return [*answer.labels, *([answer.custom] if answer.custom else [])]

    if len(request.questions) == 1:
        return "\n".join(parts(request.questions[0], answers[0]))
    return "\n".join(
        f"{q.header or q.text}: {', '.join(parts(q, a))}"
        for q, a in zip(request.questions, answers, strict=True)
    )


def answer_values(request: QuestionRequest, answers: list[Answer]) -> dict[str, str | list[str]]:
    """{question text: the chosen label, or the typed text; a list of labels (typed text
    last) where several may be chosen}: the seeds' `answers` object."""
    values: dict[str, str | list[str]] = {}
    for question, answer in zip(request.questions, answers, strict=True):
        if question.multiple:
            values[question.text] = [*answer.labels, *([answer.custom] if answer.custom else [])]
        else:
            values[question.text] = answer.custom or (answer.labels[0] if answer.labels else "")
    return values


def result_for_model(request: QuestionRequest, answers: list[Answer]) -> str:
    """What the model receives (README, "What the model receives")."""
    if request.tool == TOOL_QUESTION:
        return answer_text(request, answers)
    if request.tool == TOOL_ASK_USER_QUESTION:
        return json.dumps({"answers": answer_values(request, answers)}, ensure_ascii=False)
    if request.tool == TOOL_CONFIRM_ACTION:
        [answer] = answers
        if answer.labels:
            return json.dumps({"confirmed": answer.labels[0] == YES})
        # An ordinary message instead of Yes/No: the model reads it and decides.
        return json.dumps({"confirmed": None, "userReply": answer.custom}, ensure_ascii=False)
    raise ValueError(request.tool)  # pragma: no cover


def validated(request: QuestionRequest, answers: list[Answer]) -> list[Answer]:
    """The answers, cleaned (typed text) and checked against what was asked; raises
    InvalidAnswer saying what is wrong. Missing trailing answers count as empty."""
    if len(answers) > len(request.questions):
        raise InvalidAnswer(TOO_MANY_ANSWERS)
    answers = [*answers, *[Answer()] * (len(request.questions) - len(answers))]
    cleaned = []
    for question, answer in zip(request.questions, answers, strict=True):
        custom = clean_text(answer.custom, multiline=True)
        labels = list(dict.fromkeys(answer.labels))  # a label chosen twice counts once
        if any(label not in question.labels for label in labels):
            raise InvalidAnswer(NOT_AN_OPTION)
        if len(labels) > 1 and not question.multiple:
            raise InvalidAnswer(ONE_CHOICE)
        if labels and custom and not question.multiple:
            raise InvalidAnswer(CHOICE_OR_TYPED)
        if custom and not question.custom:
            raise InvalidAnswer(OPTIONS_ONLY)
        if len(custom) > settings.PARLEY_MAX_MESSAGE_CHARS:
            raise InvalidAnswer(TOO_LONG)
        if not labels and not custom:
            # Among several questions, the one missing is named (as the page does).
            several = len(request.questions) > 1
            raise InvalidAnswer(
                MISSING_ANSWER % {"text": question.header or question.text} if several else EMPTY
            )
        cleaned.append(Answer(labels=labels, custom=custom))
    return cleaned


def reply_text(reply: Message) -> str:
    """The text of an ordinary message that answers (or denies) what waits: its text blocks,
    one per line."""
    return "\n".join(b.text for b in reply.parsed_blocks if isinstance(b, TextBlock))


def draft_data(request: QuestionRequest, answers: list[Answer]) -> list[dict]:
    """An unsent answer as a draft keeps it: only each question's own labels, and typed text,
    checked for nothing else (a draft never answers). Raises DraftTooLong."""
    questions = request.questions
    if len(answers) > len(questions) or any(
        len(answer.custom) > settings.PARLEY_MAX_MESSAGE_CHARS for answer in answers
    ):
        raise DraftTooLong
    return [
        Answer(
            labels=[label for label in answer.labels if label in item.labels],
            custom=answer.custom,
        ).model_dump()
        for item, answer in zip(questions, answers, strict=False)
    ]


# --- A running tool's form (an elicitation), filled in ------------------------------------------


def form_values(fields: list[FormField], given: dict[str, Any]) -> dict[str, Any]:
    """The content to send back for an accepted form: each field's value from `given` (form
    strings, or JSON values from the API), converted to its type and checked against its
    limits. Raises InvalidAnswer naming the field."""
    content: dict[str, Any] = {}
    for field in fields:
        raw = given.get(field.name)
        label = field.label
        if field.kind == "boolean":
            content[field.name] = raw in (True, "true", "on", "1", 1)
            continue
        if raw is None or raw == [] or (isinstance(raw, str) and not raw.strip()):
            if field.required:
                raise InvalidAnswer(FIELD_REQUIRED % {"field": label})
            continue
        if field.kind in ("number", "integer"):
            content[field.name] = _to_number(field, raw)
        elif field.kind == "enum":
            if str(raw) not in {c.value for c in field.choices}:
                raise InvalidAnswer(FIELD_NOT_A_CHOICE % {"field": label})
            content[field.name] = str(raw)
        elif field.kind == "array":
            content[field.name] = _to_choices(field, raw)
        else:
            text = drop_invisible(str(raw))
            if field.min_length is not None and len(text) < field.min_length:
                raise InvalidAnswer(FIELD_TOO_SHORT % {"field": label, "limit": field.min_length})
            if field.max_length is not None and len(text) > field.max_length:
                raise InvalidAnswer(FIELD_TOO_LONG % {"field": label, "limit": field.max_length})
            if len(text) > MAX_ARGUMENTS_CHARS:
                raise InvalidAnswer(FIELD_TOO_LONG % {"field": label, "limit": MAX_ARGUMENTS_CHARS})
            content[field.name] = text
    return content


def _to_number(field: FormField, raw: Any) -> int | float:
    label = field.label
    try:
        number = float(raw) if not isinstance(raw, int | float) or isinstance(raw, bool) else raw
    except ValueError:
        raise InvalidAnswer(FIELD_NOT_NUMBER % {"field": label}) from None
    if isinstance(raw, bool) or not math.isfinite(number):
        raise InvalidAnswer(FIELD_NOT_NUMBER % {"field": label})
    if field.kind == "integer":
        if number != int(number):
            raise InvalidAnswer(FIELD_NOT_INTEGER % {"field": label})
        number = int(number)
    if field.minimum is not None and number < field.minimum:
        raise InvalidAnswer(FIELD_TOO_SMALL % {"field": label, "limit": _plain(field.minimum)})
    if field.maximum is not None and number > field.maximum:
        raise InvalidAnswer(FIELD_TOO_LARGE % {"field": label, "limit": _plain(field.maximum)})
    return number


def _to_choices(field: FormField, raw: Any) -> list[str]:
    """A multi-select's values from `raw` (not empty: the caller checked): a list of its
    choices' values, each once, as many as its limits allow, in the order given. Raises
    InvalidAnswer naming the field."""
    label = field.label
    if not isinstance(raw, list) or not all(isinstance(value, str) for value in raw):
        raise InvalidAnswer(FIELD_NOT_CHOICES % {"field": label})
    offered = {c.value for c in field.choices}
    seen: set[str] = set()
    for value in raw:
        if value not in offered:
            shown = clip(drop_invisible(value), 60)
            raise InvalidAnswer(FIELD_UNKNOWN_CHOICE % {"field": label, "value": shown})
        if value in seen:
            raise InvalidAnswer(FIELD_REPEATED_CHOICE % {"field": label, "value": value})
        seen.add(value)
    if field.min_items is not None and len(raw) < field.min_items:
        raise InvalidAnswer(FIELD_TOO_FEW % {"field": label, "limit": field.min_items})
    if field.max_items is not None and len(raw) > field.max_items:
        raise InvalidAnswer(FIELD_TOO_MANY % {"field": label, "limit": field.max_items})
    return list(raw)


def _plain(number: float) -> str:
    return str(int(number)) if number == int(number) else str(number)
