import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.urls import reverse

from accounts.models import Preferences, Theme

pytestmark = pytest.mark.django_db


def test_every_page_renders_the_users_theme(client, user):
    client.force_login(user)
    assert b'data-theme="system"' in client.get(reverse("chat:conversation_list")).content
    Preferences.objects.create(user=user, theme=Theme.DARK)
    page = client.get(reverse("chat:conversation_list")).content
    assert b'<html lang="en" data-theme="dark">' in page


def test_the_login_page_follows_the_system(client):
    assert b'data-theme="system"' in client.get(reverse("login")).content


def test_the_theme_switch_saves_and_returns_to_the_page(client, user):
    client.force_login(user)
    response = client.post(reverse("accounts:theme"), {"theme": "dark", "next": "/settings/"})
    assert response.status_code == 302 and response["Location"] == "/settings/"
    assert Preferences.objects.get(user=user).theme == Theme.DARK


def test_the_theme_switch_never_redirects_off_site(client, user):
    client.force_login(user)
    response = client.post(
        reverse("accounts:theme"), {"theme": "light", "next": "https://evil.example/"}
    )
    assert response["Location"] == "/"


def test_with_htmx_the_switch_answers_with_itself(client, user):
    client.force_login(user)
    response = client.post(
        reverse("accounts:theme"), {"theme": "light"}, headers={"HX-Request": "true"}
    )
    assert response.status_code == 200
    html = response.content.decode()
    assert 'data-theme-current="light"' in html
    assert 'value="light" class="button-quiet" aria-pressed="true"' in html


def test_an_unknown_theme_is_refused_where_the_user_acted(client, user):
    client.force_login(user)
    response = client.post(
        reverse("accounts:theme"), {"theme": "neon"}, headers={"HX-Request": "true"}
    )
    assert response.status_code == 400
    html = response.content.decode()
    assert '<span class="inline-alert" id="theme-alert" role="alert">Choose one of the' in html
    assert not Preferences.objects.filter(user=user).exists()
    response = client.post(reverse("accounts:theme"), {"theme": "neon"})
    assert response.status_code == 400
    assert b"Choose one of the themes offered." in response.content


def test_a_fragment_without_the_theme_reads_no_preferences(client, user, conversation):
    """The composer htmx swaps in after each message sent has no `<html>` and no switch: its
    response does not read the user's preferences."""
    client.force_login(user)
    Preferences.objects.create(user=user, theme=Theme.DARK)
    with CaptureQueriesContext(connection) as queries:
        response = client.post(
            reverse("chat:post_message", args=[conversation.pk]),
            {"text": "hello"},
            headers={"HX-Request": "true"},
        )
    assert response.content.decode().lstrip().startswith('<form id="composer"')
    assert not [q for q in queries.captured_queries if "accounts_preferences" in q["sql"]]
    page = client.get(reverse("chat:conversation_detail", args=[conversation.pk])).content
    assert b'<html lang="en" data-theme="dark">' in page
