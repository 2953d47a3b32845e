"""What a model or a tool writes is stored and shown without the invisible characters that
can make text read as something else: a right-to-left override turns `invoice‮fdp.exe` into
what reads as "invoiceexe.pdf"; zero-width and tag characters hide words."""

import json

import pytest
from django.urls import reverse

from chat.engine import tools
from chat.engine.providers.base import TextDelta, ToolCallRequest
from chat.engine.tools import FunctionTool, ToolInput
from tests.fakes import FakeProvider

pytestmark = pytest.mark.django_db

RLO = "\u202e"  # right-to-left override
HIDDEN = [RLO, "\u2066", "\u200b", "\ufeff", "\U000e0041", "\x1b"]
TRICK = f"invoice{RLO}fdp.exe \u200bsee\U000e0041 \ufeffit\x1b"


class FileInput(ToolInput):
    path: str


@pytest.fixture
def file_tool():
    tool = FunctionTool(
        name="describe_file",
        description="Describe a file.",
        input_model=FileInput,
        function=lambda arguments, context: f"{arguments.path} is 3 KB",
    )
    with tools.registry.added(tool, key=tool.name):
        yield tool


@pytest.fixture
def tricked(conversation, user, use, post, file_tool):
    """A turn whose model text, tool call and tool result all carry the trick."""
    use(
        FakeProvider(
            [
                TextDelta("Opening invoice"),
                TextDelta(f"{RLO}fdp"),
                TextDelta(".exe"),
                ToolCallRequest("c1", "describe_file", {"path": TRICK}),
            ],
            [TextDelta(f"Done: **{TRICK}**")],
        )
    )
    post(user, conversation, "Open my invoice")
    return conversation


def hidden_in(text: str) -> list[str]:
    return [char for char in HIDDEN if char in text]


def test_the_transcript_stores_no_invisible_characters_from_the_model_or_its_tools(tricked):
    blocks = [block for m in tricked.messages.order_by("order") for block in m.blocks]
    texts = [b.get("text") or b.get("content") or "" for b in blocks]
    assert "Opening invoicefdp.exe" in texts
    assert "invoicefdp.exe see it is 3 KB" in texts
    assert all(not hidden_in(text) for text in texts)


def test_pages_and_the_admin_show_no_invisible_characters(tricked, client, user, admin_client):
    client.force_login(user)
    page = client.get(reverse("chat:conversation_detail", args=[tricked.pk])).content.decode()
    assert "invoicefdp.exe" in page
    admin = admin_client.get(reverse("admin:chat_conversation_change", args=[tricked.pk]))
    admin_page = admin.content.decode()
    assert "invoicefdp.exe" in admin_page
    # The call's arguments are stored as the model sent them (the tool ran with them), and
    # shown cleaned, in the tool-call card and in the admin's raw JSON.
    assert json.dumps(TRICK)[1:-1] in json.dumps(list(tricked.messages.values("blocks")))
    assert hidden_in(page) == [] and hidden_in(admin_page) == []


def test_markdown_written_before_is_rendered_without_them():
    from chat.markdown import render_markdown

    html = render_markdown(f"**{TRICK}**")
    assert hidden_in(html) == [] and "invoicefdp.exe" in html
