"""The header's live channel: the "Questions" link with its count, and what the page's script
needs to keep the tab's title, icon and notifications in step (templates/questions/live.html)."""

from django import template
from django.template.loader import render_to_string

from accounts.selectors import preferences_for
from questions.selectors import pending_questions_for_user

register = template.Library()


@register.simple_tag(takes_context=True)
def live_channel(context) -> str:
    """Rendered for a signed-in user; a page that lists the questions itself passes them
    (`pending_questions`) and asks for the inbox's pushes (`live_inbox`)."""
    request = context["request"]
    questions = context.get("pending_questions")
    if questions is None:
        questions = pending_questions_for_user(user=request.user)
    return render_to_string(
        "questions/live.html#channel",
        live_context(request.user, questions, inbox=bool(context.get("live_inbox"))),
        request=request,
    )


def live_context(user, questions, *, inbox: bool) -> dict:
    return {
        "questions": questions,
        "notify": preferences_for(user).notify_in_browser,
        "inbox": inbox,
    }
