from django.apps import AppConfig
from django.utils.translation import gettext_lazy as _


class QuestionsConfig(AppConfig):
    """The question tools (schemas, validation, the question_request block, resolution)."""

    name = "questions"
    verbose_name = _("Questions")

    def ready(self) -> None:
        from chat import sharing
        from chat.engine import tools
        from core import jobs
        from questions import approvals, deadlines, resolving, selectors
        from questions.payloads import APPROVAL_TYPE, ELICITATION_TYPE, approval_call_state
        from questions.tools import TOOLS

        for tool in TOOLS:
            tools.register(tool)
        tools.register_action(APPROVAL_TYPE, "questions/approval.html")
        tools.register_action(ELICITATION_TYPE, "questions/elicitation.html")
        tools.resolve_pauses_by_message(approvals.deny_by_message)
        tools.register_live_cards(selectors.live_cards)
        tools.register_call_state(approval_call_state)
        jobs.every_sweep(deadlines.sweep)
        sharing.access_changed.connect(resolving.members_changed, dispatch_uid="questions")
