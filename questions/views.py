"""Answer or reject a question from the page. The block itself updates over the websocket,
in every open tab, so a successful htmx request needs no content back."""

import re

from django.http import HttpRequest, HttpResponse, QueryDict
from django.views.decorators.http import require_POST

from chat.views import control_response, conversation_view
from questions import services
from questions.blocks import BROWSER, Answer

FIELD = re.compile(r"q(\d)(-custom)?")


def answers_from_form(data: QueryDict) -> list[Answer]:
    """Form fields: q<i> (chosen labels, repeated for multi-select) and q<i>-custom, for the
    i-th question. The service knows how many questions there are; one with no field at all
    is sent as unanswered."""
    indexes = [int(m[1]) for key in data if (m := FIELD.fullmatch(key))]
    return [
        # "Other…" among radios is an empty choice: the typed text is the answer.
        Answer(
            labels=[label for label in data.getlist(f"q{i}") if label],
            custom=data.get(f"q{i}-custom", ""),
        )
        for i in range(max(indexes, default=0) + 1)
    ]


@require_POST
@conversation_view
def answer(request: HttpRequest, conversation_id: int, tool_call_id: str) -> HttpResponse:
    return control_response(
        request,
        conversation_id,
        lambda: services.answer_question(
            user=request.user,
            conversation_id=conversation_id,
            tool_call_id=tool_call_id,
            answers=answers_from_form(request.POST),
            via=BROWSER,
        ),
        alert=alert_id(tool_call_id),
    )


@require_POST
@conversation_view
def reject(request: HttpRequest, conversation_id: int, tool_call_id: str) -> HttpResponse:
    return control_response(
        request,
        conversation_id,
        lambda: services.reject_question(
            user=request.user,
            conversation_id=conversation_id,
            tool_call_id=tool_call_id,
            via=BROWSER,
        ),
        alert=alert_id(tool_call_id),
    )


@require_POST
@conversation_view
def draft(request: HttpRequest, conversation_id: int, tool_call_id: str) -> HttpResponse:
    """Save what the user has chosen or typed so far (posted by the block as they go)."""
    return control_response(
        request,
        conversation_id,
        lambda: services.save_draft(
            user=request.user,
            conversation_id=conversation_id,
            tool_call_id=tool_call_id,
            answers=answers_from_form(request.POST),
            client=request.POST.get("client", ""),
        ),
        alert=alert_id(tool_call_id),
    )


def alert_id(tool_call_id: str) -> str:
    """The question block's alert (templates/questions/question.html)."""
    return f"question-{tool_call_id}-alert"
