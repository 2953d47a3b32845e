"""Answer or reject a question from the page. The block itself updates over the websocket,
in every open tab, so a successful htmx request needs no content back."""

from django.http import HttpRequest, HttpResponse
from django.views.decorators.http import require_POST

from chat.views import control_response, conversation_view
from questions import services
from questions.blocks import Answer


def answers_from_form(data, count: int) -> list[Answer]:
    """Form fields: q<i> (chosen labels, repeated for multi-select) and q<i>-custom."""
    return [
        Answer(labels=data.getlist(f"q{i}"), custom=data.get(f"q{i}-custom", ""))
        for i in range(count)
    ]


@require_POST
@conversation_view
def answer(request: HttpRequest, conversation_id: int, tool_call_id: str) -> HttpResponse:
    count = _count(request.POST.get("count"))
    return control_response(
        request,
        conversation_id,
        lambda: services.answer_question(
            user=request.user,
            conversation_id=conversation_id,
            tool_call_id=tool_call_id,
            answers=answers_from_form(request.POST, count),
        ),
    )


@require_POST
@conversation_view
def reject(request: HttpRequest, conversation_id: int, tool_call_id: str) -> HttpResponse:
    return control_response(
        request,
        conversation_id,
        lambda: services.reject_question(
            user=request.user, conversation_id=conversation_id, tool_call_id=tool_call_id
        ),
    )


def _count(raw: str | None) -> int:
    try:
        return max(1, min(int(raw or 1), 4))
    except ValueError:
        return 1
