"""A process that starts serving loads what turns and pages need, then freezes it
(chat.runner.warm_up), so the collector's full passes stay short."""

import gc
import sys

from django.template import engines

from chat import runner


def test_warm_up_loads_the_provider_and_every_template_then_freezes_them(settings):
    settings.AGENT_PROVIDER = "openai"
    loader = engines["django"].engine.template_loaders[0]
    loader.reset()
    gc.unfreeze()
    try:
        runner.warm_up()
        frozen = gc.get_freeze_count()
    finally:
        gc.unfreeze()
    assert "chat.providers.openai" in sys.modules
    compiled = {str(key) for key in loader.get_template_cache}
    for name in ("chat/conversation.html", "questions/question.html", "base.html"):
        assert any(name in key for key in compiled), name
    assert frozen > 10_000  # the code and settings loaded so far, at the least
