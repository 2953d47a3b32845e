import pytest
from django.urls import reverse

from accounts.models import Preferences, Theme

pytestmark = pytest.mark.django_db


def test_settings_page_saves_the_users_preferences(client, user):
    client.force_login(user)
    page = client.get(reverse("accounts:preferences"))
    assert page.status_code == 200
    assert b"Follow the system" in page.content

    response = client.post(
        reverse("accounts:preferences"),
        {"theme": "dark", "notify_in_browser": "on", "question_expire_after": "600"},
        follow=True,
    )
    assert b"Settings saved." in response.content
    preferences = Preferences.objects.get(user=user)
    assert (preferences.theme, preferences.notify_in_browser) == (Theme.DARK, True)
    assert preferences.question_expire_after == 600


def test_an_invalid_choice_is_refused_and_shown(client, user):
    client.force_login(user)
    response = client.post(reverse("accounts:preferences"), {"theme": "neon"})
    assert response.status_code == 400
    assert b"Select a valid choice" in response.content
    assert not Preferences.objects.filter(user=user).exists()
