"""Answer or reject a question from its conversation or from the inbox, and the inbox page.
The block itself updates over the websocket, in every open tab, so a successful htmx request
from a conversation needs no content back; from the inbox, the question leaves the list."""

import re

from django.http import HttpRequest, HttpResponse, QueryDict
from django.shortcuts import redirect, render
from django.views.decorators.http import require_GET, require_POST

from chat.views import PAGE_ALERT, control_response, conversation_view
from questions import approvals, resolving
from questions.payloads import BROWSER, Answer
from questions.selectors import inbox_questions_for_user

INBOX = "questions/inbox.html"

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


@require_GET
def inbox(request: HttpRequest) -> HttpResponse:
    """Every pending question of the user's, newest first, each answerable here."""
    questions = inbox_questions_for_user(user=request.user)
    context = {"questions": questions, "pending_questions": questions, "live_inbox": True}
    return render(request, INBOX, context)


@require_POST
@conversation_view
def answer(request: HttpRequest, conversation_id: int, tool_call_id: str) -> HttpResponse:
    response = control_response(
        request,
        conversation_id,
        lambda: resolving.answer_question(
            user=request.user,
            conversation_id=conversation_id,
            tool_call_id=tool_call_id,
            answers=answers_from_form(request.POST),
            via=BROWSER,
        ),
        alert=alert_id(tool_call_id),
    )
    return for_page(request, response, conversation_id, tool_call_id)


@require_POST
@conversation_view
def reject(request: HttpRequest, conversation_id: int, tool_call_id: str) -> HttpResponse:
    response = control_response(
        request,
        conversation_id,
        lambda: resolving.reject_question(
            user=request.user,
            conversation_id=conversation_id,
            tool_call_id=tool_call_id,
            via=BROWSER,
        ),
        alert=alert_id(tool_call_id),
    )
    return for_page(request, response, conversation_id, tool_call_id)


@require_POST
@conversation_view
def assign(request: HttpRequest, conversation_id: int, tool_call_id: str) -> HttpResponse:
    """Assign the question (`assignee`: a user id, or empty for everyone); the block shows it
    in every tab over the websocket."""
    try:
        assignee_id = int(request.POST.get("assignee") or 0) or None
    except ValueError:
        assignee_id = -1  # no such person: refused as one who may not be assigned
    return control_response(
        request,
        conversation_id,
        lambda: resolving.assign_question(
            user=request.user,
            conversation_id=conversation_id,
            tool_call_id=tool_call_id,
            assignee_id=assignee_id,
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
        lambda: resolving.save_draft(
            user=request.user,
            conversation_id=conversation_id,
            tool_call_id=tool_call_id,
            answers=answers_from_form(request.POST),
            client=request.POST.get("client", ""),
        ),
        alert=alert_id(tool_call_id),
    )


@require_POST
@conversation_view
def decide(request: HttpRequest, conversation_id: int, tool_call_id: str) -> HttpResponse:
    """Decide a tool call's approval: the button pressed is `decision` (allow, always, deny);
    `arguments` holds the edited arguments when the person opened "Edit arguments", `feedback`
    what they tell the agent with a deny; `widen` "on" makes Always allow's rule count in all
    their conversations, not only this one."""
    post = request.POST
    response = control_response(
        request,
        conversation_id,
        lambda: approvals.decide(
            user=request.user,
            conversation_id=conversation_id,
            tool_call_id=tool_call_id,
            decision=post.get("decision", ""),
            # Sent only while "Edit arguments" is open (the box is disabled otherwise).
            arguments=post.get("arguments"),
            feedback=post.get("feedback", ""),
            via=BROWSER,
            widen=post.get("widen") == "on",
        ),
        alert=alert_id(tool_call_id),
    )
    return for_page(request, response, conversation_id, tool_call_id)


@require_POST
@conversation_view
def decide_all(request: HttpRequest, conversation_id: int) -> HttpResponse:
    """ "Allow all N" or "Deny all" of a step's waiting approvals: `decision`, and a `call`
    per approval, "<tool call id> <digest of the arguments shown>"; `batch` names the card
    (its refusal is said there)."""
    calls = dict(value.partition(" ")[::2] for value in request.POST.getlist("call"))
    batch = re.sub(r"[^A-Za-z0-9_-]", "", request.POST.get("batch", ""))[:100]
    return control_response(
        request,
        conversation_id,
        lambda: approvals.decide_all(
            user=request.user,
            conversation_id=conversation_id,
            calls=calls,
            decision=request.POST.get("decision", ""),
            via=BROWSER,
        ),
        alert=f"approval-batch-{batch}-alert",
    )


@require_POST
@conversation_view
def deny_stops_step(request: HttpRequest, conversation_id: int) -> HttpResponse:
    """The conversation's "a deny stops the whole step" switch: `on` is "on" or "off" (the
    last value sent: the form sends "off" before the box's "on")."""
    values = request.POST.getlist("on") or ["off"]
    return control_response(
        request,
        conversation_id,
        lambda: approvals.set_deny_stops_step(
            user=request.user, conversation_id=conversation_id, on=values[-1] == "on"
        ),
        alert=PAGE_ALERT,
    )


@require_POST
@conversation_view
def respond(request: HttpRequest, conversation_id: int, tool_call_id: str) -> HttpResponse:
    """Answer a running tool's request: `action` (accept, decline, cancel), and the form's
    fields as `field-<name>`, a multi-select's ticked values each as `choices-<name>`."""
    values: dict[str, str | list[str]] = {
        key[6:]: value for key, value in request.POST.items() if key.startswith("field-")
    }
    for key in request.POST:
        if key.startswith("choices-"):
            values[key[8:]] = request.POST.getlist(key)
    response = control_response(
        request,
        conversation_id,
        lambda: resolving.answer_elicitation(
            user=request.user,
            conversation_id=conversation_id,
            tool_call_id=tool_call_id,
            action=request.POST.get("action", ""),
            values=values,
            via=BROWSER,
        ),
        alert=alert_id(tool_call_id),
    )
    return for_page(request, response, conversation_id, tool_call_id)


def for_page(
    request: HttpRequest, response: HttpResponse, conversation_id: int, tool_call_id: str
) -> HttpResponse:
    """From the inbox, a resolved question leaves the list at once (the page's other tabs
    see it go over the live channel), and without JavaScript the inbox is shown again.
    Refusals are shown as from the conversation: in the block's alert."""
    # The inbox's forms say where they are (templates/questions/question.html).
    if request.POST.get("from") != "inbox" or response.status_code >= 400:
        return response
    if request.htmx:
        key = f"{conversation_id}-{tool_call_id}"
        return render(request, f"{INBOX}#resolved", {"key": key})
    return redirect("questions:inbox")


def alert_id(tool_call_id: str) -> str:
    """The question block's alert (templates/questions/question.html)."""
    return f"question-{tool_call_id}-alert"
