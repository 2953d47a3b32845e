import pytest
from django.urls import reverse

from chat import services
from chat.errors import NothingToRetry, NothingToStop
from chat.models import AgentState, Conversation, Message, Role
from tests.factories import add_message, fail_turn

pytestmark = pytest.mark.django_db


@pytest.fixture
def client_ada(client, user):
    client.force_login(user)
    return client


def detail_url(conversation):
    return reverse("chat:conversation_detail", args=[conversation.pk])


def test_every_page_but_login_requires_a_user(client, conversation):
    for url in [reverse("chat:conversation_list"), detail_url(conversation), "/admin/"]:
        response = client.get(url)
        assert response.status_code == 302
        assert (
            response["Location"].startswith(reverse("login"))
            or "/admin/login/" in response["Location"]
        )


def test_login_form_has_the_labelled_fields(client):
    html = client.get(reverse("login")).content.decode()
    assert '<label for="id_username">Username</label>' in html
    assert '<label for="id_password">Password</label>' in html
    assert ">Log in</button>" in html


def test_logging_in_lands_on_a_blank_composer_without_a_conversation(client, user):
    response = client.post(
        reverse("login"), {"username": "ada", "password": "pw-ada-123"}, follow=True
    )
    assert response.redirect_chain[-1][0] == reverse("chat:conversation_create")
    assert 'id="composer-text"' in response.content.decode()
    assert not Conversation.objects.exists()


def test_home_is_the_newest_conversation(client_ada, user):
    services.create_conversation(owner=user, title="Older")
    newer = services.create_conversation(owner=user, title="Newer")
    assert client_ada.get(reverse("chat:home"))["Location"] == detail_url(newer)


def test_list_shows_only_my_conversations_newest_first(client_ada, user, other_user):
    older = services.create_conversation(owner=user, title="Older")
    newer = services.create_conversation(owner=user, title="Newer")
    services.create_conversation(owner=other_user, title="Not mine")
    services.rename_conversation(user=user, conversation_id=older.pk, title="Older, renamed")
    html = client_ada.get(reverse("chat:conversation_list")).content.decode()
    assert "Not mine" not in html
    assert html.index("Older, renamed") < html.index(newer.title)


def test_new_conversation_is_a_blank_composer_whose_first_message_creates_it(client_ada, user):
    page = client_ada.get(reverse("chat:conversation_create")).content.decode()
    assert '<label for="composer-text" class="visually-hidden">Message</label>' in page
    assert "/ws/conversations/" not in page
    assert not Conversation.objects.exists()
    refused = client_ada.post(reverse("chat:conversation_create"), {"text": "  "})
    assert refused.status_code == 400
    assert not Conversation.objects.exists()
    response = client_ada.post(reverse("chat:conversation_create"), {"text": "Hello"})
    conversation = Conversation.objects.get(owner=user)
    assert response["Location"] == detail_url(conversation)
    assert conversation.messages.get().parsed_blocks[0].text == "Hello"


def test_a_new_conversations_composer_sent_by_htmx_keeps_a_refused_text_and_follows_a_created_one(
    client_ada, user
):
    url = reverse("chat:conversation_create")
    refused = client_ada.post(url, {"text": "  "}, headers={"HX-Request": "true"})
    assert refused.status_code == 400
    assert 'id="composer"' in refused.content.decode()
    assert 'aria-invalid="true"' in refused.content.decode()
    assert "<html" not in refused.content.decode()  # the composer alone, swapped in place
    assert not Conversation.objects.exists()
    created = client_ada.post(url, {"text": "Hello"}, headers={"HX-Request": "true"})
    assert created["HX-Redirect"] == detail_url(Conversation.objects.get(owner=user))


def test_the_sidebar_groups_conversations_by_day_with_the_pinned_first(client_ada, user):
    from datetime import timedelta

    from django.utils import timezone

    now = timezone.now()
    for title, days in [("Old one", 30), ("Last week", 3), ("Yesterday's", 1), ("Today's", 0)]:
        conversation = services.create_conversation(owner=user, title=title)
        Conversation.objects.filter(pk=conversation.pk).update(
            updated_at=now - timedelta(days=days)
        )
    services.pin_conversation(user=user, conversation_id=conversation.pk - 2, pinned=True)
    html = client_ada.get(reverse("chat:home"), follow=True).content.decode()
    order = ["Pinned", "Last week", "Today", "Today&#x27;s", "Yesterday", "Yesterday&#x27;s"]
    order += ["Older", "Old one"]
    places = [html.index(f">{text}<") for text in order]
    assert places == sorted(places)
    assert "Previous 7 days" not in html  # its one conversation is pinned


def test_sidebar_actions_answer_with_the_sidebar_list(client_ada, user, conversation):
    url = reverse("chat:conversation_pin", args=[conversation.pk])
    html = client_ada.post(url, {"from": "sidebar", "pinned": "1"}, HTTP_HX_REQUEST="true")
    assert html.content.decode().lstrip().startswith('<div id="sidebar-list"')
    assert ">Pinned<" in html.content.decode()
    url = reverse("chat:conversation_delete", args=[conversation.pk])
    html = client_ada.post(url, {"from": "sidebar"}, HTTP_HX_REQUEST="true").content.decode()
    assert reverse("chat:conversation_restore", args=[conversation.pk]) in html
    assert "First chat" not in html
    url = reverse("chat:conversation_restore", args=[conversation.pk])
    html = client_ada.post(url, {"from": "sidebar"}, HTTP_HX_REQUEST="true").content.decode()
    assert "First chat" in html


def test_foreign_conversation_is_404_everywhere(client, other_user, conversation):
    client.force_login(other_user)
    pk = conversation.pk
    assert client.get(detail_url(conversation)).status_code == 404
    for name in ["post_message", "conversation_rename", "conversation_delete", "retry"]:
        response = client.post(reverse(f"chat:{name}", args=[pk]), {"text": "hi", "title": "x"})
        assert response.status_code == 404, name
    assert Conversation.objects.get(pk=pk).title == "First chat"
    assert not Message.objects.exists()


def test_unknown_conversation_is_a_friendly_404(client_ada):
    response = client_ada.get("/c/999999/")
    assert response.status_code == 404
    assert "There is nothing here." in response.content.decode()


def test_empty_message_shows_an_inline_error_and_saves_nothing(client_ada, conversation):
    url = reverse("chat:post_message", args=[conversation.pk])
    response = client_ada.post(url, {"text": "   "}, headers={"HX-Request": "true"})
    assert response.status_code == 400
    html = response.content.decode()
    assert 'role="alert">Type a message first.</p>' in html
    assert 'id="composer"' in html
    assert not Message.objects.exists()


def test_too_long_message_keeps_the_text_and_explains_the_limit(client_ada, conversation, settings):
    settings.PARLEY_MAX_MESSAGE_CHARS = 5
    url = reverse("chat:post_message", args=[conversation.pk])
    response = client_ada.post(url, {"text": "abcdefg"})
    assert response.status_code == 413
    html = response.content.decode()
    assert "the limit is 5 characters" in html
    assert ">abcdefg</textarea>" in html
    assert not Message.objects.exists()


def test_oversized_request_body_is_a_clear_400_not_a_crash(client_ada, conversation, settings):
    url = reverse("chat:post_message", args=[conversation.pk])
    response = client_ada.post(url, {"text": "x" * (settings.DATA_UPLOAD_MAX_MEMORY_SIZE + 1)})
    assert response.status_code == 400
    assert "could not be understood" in response.content.decode()
    assert not Message.objects.exists()


def test_htmx_send_returns_a_fresh_composer(client_ada, conversation, dispatched):
    url = reverse("chat:post_message", args=[conversation.pk])
    response = client_ada.post(url, {"text": "hello"}, headers={"HX-Request": "true"})
    assert response.status_code == 200
    html = response.content.decode()
    assert html.lstrip().startswith('<form id="composer"')
    assert "hello" not in html
    assert Message.objects.get().role == Role.USER


def test_plain_post_redirects_back_to_the_conversation(client_ada, conversation, dispatched):
    response = client_ada.post(reverse("chat:post_message", args=[conversation.pk]), {"text": "x"})
    assert response["Location"] == detail_url(conversation)


def test_user_text_is_escaped_and_assistant_markdown_sanitised(client_ada, conversation):
    add_message(conversation.pk, "<b>bold?</b> <script>alert(1)</script>", role=Role.USER)
    add_message(conversation.pk, "**strong** <img src=x onerror=alert(2)> [x](javascript:alert(3))")
    html = client_ada.get(detail_url(conversation)).content.decode()
    assert "&lt;b&gt;bold?&lt;/b&gt; &lt;script&gt;alert(1)&lt;/script&gt;" in html
    assert "<strong>strong</strong>" in html
    assert "onerror" not in html.replace("&lt;img src=x onerror=alert(2)&gt;", "")
    assert 'href="javascript:' not in html
    assert "<img" not in html


def test_unknown_block_renders_as_a_generic_block(client_ada, conversation):
    # Stored by a later version: written as raw JSON, as that version would have.
    Message.objects.create(
        conversation=conversation,
        role=Role.ASSISTANT,
        order=0,
        blocks=[{"type": "hologram", "text": "<i>from the future</i>"}],
        created_seq=1,
        seq=1,
    )
    response = client_ada.get(detail_url(conversation))
    assert response.status_code == 200
    html = response.content.decode()
    assert "&lt;i&gt;from the future&lt;/i&gt;" in html
    assert 'class="block block-generic"' in html


def test_error_block_is_an_alert_with_retry_only_while_failed(client_ada, conversation):
    fail_turn(conversation.pk)
    html = client_ada.get(detail_url(conversation)).content.decode()
    assert 'class="block block-error" role="alert"' in html
    assert ">Retry</button>" in html
    Conversation.objects.filter(pk=conversation.pk).update(agent_state=AgentState.IDLE)
    assert ">Retry</button>" not in client_ada.get(detail_url(conversation)).content.decode()


def test_rename_and_delete_over_htmx(client_ada, conversation):
    headers = {"HX-Request": "true"}
    rename = reverse("chat:conversation_rename", args=[conversation.pk])
    response = client_ada.post(rename, {"title": "Holiday"}, headers=headers)
    assert '<a class="conversation-link"' in response.content.decode()
    assert "Holiday" in response.content.decode()
    delete = reverse("chat:conversation_delete", args=[conversation.pk])
    assert client_ada.post(delete, headers=headers).content == b""
    assert not Conversation.objects.filter(deleted_at__isnull=True).exists()


def test_get_is_not_allowed_on_writes(client_ada, conversation):
    response = client_ada.get(reverse("chat:conversation_delete", args=[conversation.pk]))
    assert response.status_code == 405
    assert Conversation.objects.exists()


@pytest.mark.parametrize(
    ("language", "expected"),
    [("zh-hans", "新建对话"), ("pt-br", "Nova conversa"), ("en", "New conversation")],
)
def test_pages_follow_the_language_switcher(client_ada, language, expected):
    response = client_ada.post(reverse("set_language"), {"language": language, "next": "/"})
    assert response.status_code == 302
    html = client_ada.get("/", follow=True).content.decode()
    assert expected in html
    assert f'<html lang="{language}"' in html


def test_pages_follow_the_browsers_language(client_ada):
    html = client_ada.get(
        "/", headers={"Accept-Language": "pt-BR,pt;q=0.9"}, follow=True
    ).content.decode()
    assert "Nova conversa" in html


def test_admin_shows_a_read_only_escaped_transcript(admin_client, conversation):
    add_message(conversation.pk, "<script>steal()</script>", role=Role.USER)
    url = reverse("admin:chat_conversation_change", args=[conversation.pk])
    html = admin_client.get(url).content.decode()
    assert "&lt;script&gt;steal()&lt;/script&gt;" in html
    assert "<script>steal()" not in html
    assert 'name="_save"' not in html
    assert admin_client.get(reverse("admin:chat_conversation_add")).status_code == 403


def test_security_headers(client_ada):
    response = client_ada.get("/")
    assert "script-src 'self'" in response["Content-Security-Policy"]
    assert response["X-Frame-Options"] == "DENY"


def test_control_characters_never_reach_the_database(client_ada, conversation, dispatched):
    url = reverse("chat:post_message", args=[conversation.pk])
    assert client_ada.post(url, {"text": "a\x00b\x07c"}).status_code == 302
    assert Message.objects.get().blocks == [{"type": "text", "text": "abc"}]
    rename = reverse("chat:conversation_rename", args=[conversation.pk])
    client_ada.post(rename, {"title": "T\x00itle"})
    assert Conversation.objects.get().title == "Title"


def test_a_refused_retry_or_stop_goes_to_the_alert_beside_its_button(client_ada, conversation):
    htmx = {"HX-Request": "true"}
    retry = client_ada.post(reverse("chat:retry", args=[conversation.pk]), headers=htmx)
    assert (retry.status_code, retry["HX-Retarget"]) == (409, "#retry-alert")
    assert retry.content.decode() == str(NothingToRetry.default_message)
    stop = client_ada.post(reverse("chat:stop", args=[conversation.pk]), headers=htmx)
    assert (stop.status_code, stop["HX-Retarget"]) == (409, "#stop-alert")
    assert stop.content.decode() == str(NothingToStop.default_message)
