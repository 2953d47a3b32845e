"""What Slack's interactions do, whichever way they came (the Interactivity URL's POST,
slackbot.views, or Socket Mode, slackbot.socket): a button of a question's message answers it
(an option, Allow, Deny) or opens its modal; a modal's submission answers it; the link's
Confirm button confirms it. Every answer goes through the services every channel uses
(questions.resolving, questions.approvals) as the linked Parley user, with `answered_via`
slack: first answer wins everywhere. A Slack user who is not linked, or whose Parley user may
not answer (a viewer, not a member), is told so ephemerally, nothing is answered, and the
refusal is kept (SlackRefusal) and logged."""

import json
import logging
from functools import partial

from django.conf import settings
from django.utils import translation
from django.utils.translation import gettext as _
from django.utils.translation import gettext_lazy
from pydantic import ValidationError

from accounts.selectors import preferences_for
from chat.errors import ConversationNotFound, NotAllowed
from chat.models import ACTING_ROLES, MemberRole
from chat.selectors import role_of
from core.errors import ParleyError
from questions import approvals, resolving
from questions.errors import InvalidAnswer, QuestionAlreadyResolved
from questions.models import Question, QuestionKind
from questions.payloads import ACCEPT, ALLOW, DECLINE, DENY, SLACK, Answer
from reach.links import choice_options
from slackbot import blocks, client, linking, modals
from slackbot.models import RefusalReason, SlackRefusal
from slackbot.payloads import Action, Interaction

logger = logging.getLogger("parley.slack")

NOT_LINKED = gettext_lazy(
    "Link your Slack account to Parley first (Parley, Settings, Slack). Nothing was answered."
)
NOT_ALLOWED = gettext_lazy(
    "You may not answer this question in Parley (only its conversation's owner and "
    "participants may). Nothing was answered."
)
GONE = gettext_lazy("This question is no longer in Parley.")
VOTE_COUNTED = gettext_lazy("Counted. This approval waits for more people's decisions.")
NOT_OPENED = gettext_lazy("Slack did not open the form. Try again, or answer in Parley.")
REFUSALS = {
    RefusalReason.UNLINKED: NOT_LINKED,
    RefusalReason.VIEWER: NOT_ALLOWED,
    RefusalReason.NOT_MEMBER: NOT_ALLOWED,
}


class Refused(Exception):
    """What an interaction answered nothing for, said to the person who sent it."""

    def __init__(self, message: str) -> None:
        self.message = str(message)
        super().__init__(self.message)


def handle(data: dict) -> dict | None:
    """Do what an interaction payload asks; returns the body of its acknowledgement (a
    view_submission's `response_action`), or None for an empty one."""
    try:
        interaction = Interaction.model_validate(data)
    except ValidationError:
        logger.warning("ignored a Slack interaction Parley does not read")
        return None
    if interaction.type == "block_actions" and interaction.actions:
        try:
            act(interaction, interaction.actions[0])
        except Refused as refused:
            ephemeral(interaction, refused.message)
        return None
    if interaction.type == "view_submission" and interaction.view is not None:
        try:
            return submit(interaction)
        except Refused as refused:
            return {"response_action": "update", "view": notice_view(refused.message)}
    return None


def act(interaction: Interaction, action: Action) -> None:
    """A button: answer, decide, open a modal, or confirm a link. Raises Refused."""
    if action.action_id == blocks.OPEN_IN_PARLEY:
        return
    if action.action_id == blocks.CONFIRM_LINK:
        confirm(interaction, action)
        return
    user, question = answerer(interaction, action.value.partition(":")[0])
    with translation.override(language(user)):
        if action.action_id in (blocks.OPEN, blocks.DENY_WITH_FEEDBACK):
            if not question.is_pending:
                raise Refused(blocks.closed_text(question))
            view = (
                modals.deny_view(question)
                if action.action_id == blocks.DENY_WITH_FEEDBACK
                else modals.answer_view(question)
            )
            try:
                client.call("views.open", trigger_id=interaction.trigger_id, view=view)
            except Exception:  # Slack's refusal or outage: said, never the request's end
                logger.warning("Slack did not open a modal", exc_info=True)
                raise Refused(NOT_OPENED) from None
            return
        try:
            answer(user, question, lambda: click(user, question, action))
        except InvalidInModal as invalid:
            raise Refused(invalid.message) from None
        if question.kind == QuestionKind.TOOL_APPROVAL:
            question.refresh_from_db(fields=["status"])
            if question.is_pending:  # one vote of an approval that wants several people's
                ephemeral(interaction, str(VOTE_COUNTED))


def click(user, question: Question, action: Action) -> None:
    """The service a message's button calls."""
    common = {
        "user": user,
        "conversation_id": question.conversation_id,
        "tool_call_id": question.tool_call_id,
        "via": SLACK,
    }
    if action.action_id in (blocks.ALLOW, blocks.DENY):
        decision = ALLOW if action.action_id == blocks.ALLOW else DENY
        approvals.decide(**common, decision=decision)
        return
    if action.action_id == blocks.DECLINE:
        resolving.answer_elicitation(**common, action=DECLINE)
        return
    options = choice_options(question)
    _option, _sep, index = action.action_id.partition(":")
    if _option != blocks.OPTION or not index.isdigit() or int(index) >= len(options):
        raise Refused(InvalidAnswer.default_message)
    resolving.answer_question(**common, answers=[Answer(labels=[options[int(index)].label])])


def submit(interaction: Interaction) -> dict | None:
    """A modal's submission: its answers, a tool's form, or Deny with feedback. Returns the
    modal's errors when the answer does not fit. Raises Refused."""
    view = interaction.view
    try:
        question_id = str(json.loads(view.private_metadata)["q"])
    except (ValueError, KeyError, TypeError):
        return None
    user, question = answerer(interaction, question_id)
    values = view.state.values
    call = submitted(view.callback_id, question, values)
    if call is None:
        return None
    common = {
        "user": user,
        "conversation_id": question.conversation_id,
        "tool_call_id": question.tool_call_id,
        "via": SLACK,
    }
    with translation.override(language(user)):
        try:
            answer(user, question, lambda: call(**common))
        except InvalidInModal as invalid:
            first = next(iter(values), modals.FEEDBACK_BLOCK)
            return {"response_action": "errors", "errors": {first: invalid.message}}
    return None


def submitted(callback_id: str, question: Question, values: dict):
    """The service a modal's submission calls, its answer bound; None for a modal that does
    not fit the question."""
    if callback_id == blocks.DENY_VIEW and question.kind == QuestionKind.TOOL_APPROVAL:
        feedback = modals.submitted_feedback(values)
        return partial(approvals.decide, decision=DENY, feedback=feedback)
    if callback_id == blocks.FORM_VIEW and question.kind == QuestionKind.ELICITATION:
        content = modals.submitted_form(question, values)
        return partial(resolving.answer_elicitation, action=ACCEPT, values=content)
    if callback_id == blocks.ANSWER_VIEW and not question.is_tool_request:
        answers = modals.submitted_answers(question, values)
        return partial(resolving.answer_question, answers=answers)
    return None


class InvalidInModal(ParleyError):
    """An answer the question refused, to be shown on the modal's form."""


def answer(user, question: Question, service) -> None:
    """Run the answering `service`; a lost race or a refusal becomes Refused (said to the
    person), an answer that does not fit InvalidInModal."""
    try:
        service()
    except QuestionAlreadyResolved:
        question.refresh_from_db()
        raise Refused(blocks.closed_text(question)) from None
    except InvalidAnswer as invalid:
        raise InvalidInModal(str(invalid.message)) from None
    except (NotAllowed, ConversationNotFound):
        raise Refused(NOT_ALLOWED) from None


def answerer(interaction: Interaction, question_id: str) -> tuple:
    """The linked user who sent the interaction and the question it is about, if they may
    answer it; else the refusal is kept and Refused raised."""
    slack_user_id, team_id = interaction.user.id, interaction.team_id
    user = linking.linked_user(slack_user_id=slack_user_id, team_id=team_id)
    question = (
        Question.objects.select_related("conversation", "message", "answered_by", "assigned_to")
        .filter(pk=int(question_id) if question_id.isdigit() else 0)
        .first()
    )
    reason = RefusalReason.UNLINKED if user is None else None
    if reason is None and question is not None:
        role = role_of(user=user, conversation_id=question.conversation_id)
        if role not in ACTING_ROLES:
            reason = RefusalReason.VIEWER if role == MemberRole.VIEWER else RefusalReason.NOT_MEMBER
    if reason is not None:
        SlackRefusal.objects.create(
            slack_user_id=slack_user_id,
            team_id=team_id,
            user=user,
            question=question,
            reason=reason,
        )
        logger.warning(
            "refused a Slack interaction of %s (%s) on question %s: %s",
            slack_user_id,
            user,
            question_id,
            reason,
        )
        with translation.override(language(user)):
            raise Refused(REFUSALS[reason])
    if question is None:
        raise Refused(GONE)
    return user, question


def confirm(interaction: Interaction, action: Action) -> None:
    """The link's Confirm button, clicked by the Slack user it was sent to."""
    try:
        link = linking.confirm_link(
            nonce=action.value, slack_user_id=interaction.user.id, team_id=interaction.team_id
        )
    except linking.LinkRefused as refused:
        raise Refused(refused.message) from None
    with translation.override(language(link.user)):
        ephemeral(interaction, str(linking.CONFIRMED) % {"name": link.user.get_username()})


def language(user) -> str:
    if user is None:
        return settings.LANGUAGE_CODE
    return preferences_for(user).language or settings.LANGUAGE_CODE


def ephemeral(interaction: Interaction, text: str) -> None:
    """Say `text` to the person who sent the interaction, in its channel, for them alone.
    Slack's failure is logged: the interaction's own outcome stands."""
    if not interaction.channel_id:
        return
    try:
        client.call(
            "chat.postEphemeral",
            channel=interaction.channel_id,
            user=interaction.user.id,
            text=blocks.escape(text),
            blocks=[blocks.section(text)],
        )
    except Exception:
        logger.warning("could not tell %s in Slack: %s", interaction.user.id, text, exc_info=True)


def notice_view(text: str) -> dict:
    """A modal that only says `text` (a submission that answered nothing)."""
    return {
        "type": "modal",
        "title": blocks.plain(_("Parley"), blocks.LIMITS["modal_title"]),
        "close": blocks.plain(_("Close"), blocks.LIMITS["modal_button"]),
        "blocks": [blocks.section(text)],
    }
