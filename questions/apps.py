from django.apps import AppConfig
from django.utils.translation import gettext_lazy as _


class QuestionsConfig(AppConfig):
    """The question tools (schemas, validation, the question_request block, resolution)."""

    name = "questions"
    verbose_name = _("Questions")

    def ready(self) -> None:
        from chat import pausing, runner
        from questions import deadlines
        from questions.asking import handler

        pausing.register(handler)
        runner.every_sweep(deadlines.sweep)
