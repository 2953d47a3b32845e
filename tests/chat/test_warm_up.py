"""A process that starts serving loads what turns and pages need, then freezes it
(chat.engine.runner.warm_up), so the collector's full passes stay short."""

import gc
import sys

from django.template import engines

from chat.engine import providers, runner
from chat.engine.eventloop import new_event_loop


def test_warm_up_loads_the_provider_and_every_template_then_freezes_them(settings, monkeypatch):
    settings.AGENT_PROVIDER = "openai"
    settings.OPENAI_BASE_URL = "http://127.0.0.1:9/v1"
    built = []
    build = providers.build_provider
    monkeypatch.setattr(providers, "build_provider", lambda: built.append(build()) or built[-1])
    loader = engines["django"].engine.template_loaders[0]
    loader.reset()
    loop = new_event_loop()
    gc.unfreeze()
    try:
        runner.warm_up(loop)
        frozen = gc.get_freeze_count()
    finally:
        gc.unfreeze()
        loop.close()
    assert "chat.engine.providers.openai" in sys.modules
    # The provider the loop's turns will use is built already.
    assert len(built) == 1 and providers.provider_for(loop) is built[0]
    compiled = {str(key) for key in loader.get_template_cache}
    for name in ("chat/conversation.html", "questions/question.html", "base.html"):
        assert any(name in key for key in compiled), name
    assert frozen > 10_000  # the code and settings loaded so far, at the least
