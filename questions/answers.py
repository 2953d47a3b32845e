"""What an answer says, without writing anything: an answer checked against its question
(`validated`), mapped from {question text: value} (`answers_by_question_text`), and what it
reads as: the user message it inserts, the seeds' `answers` object, what the model receives."""

import json

from django.conf import settings
from django.utils.translation import gettext_lazy as _

from core.text import clean_text
from questions.blocks import Answer
from questions.errors import InvalidAnswer
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
