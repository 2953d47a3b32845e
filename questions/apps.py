from django.apps import AppConfig
from django.utils.translation import gettext_lazy as _


class QuestionsConfig(AppConfig):
    """The question tools (schemas, validation, the question_request block, resolution)."""

    name = "questions"
    verbose_name = _("Questions")

    def ready(self) -> None:
        from chat import pausing
        from questions.asking import handler

        pausing.register(handler)
