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
        {"theme": "dark", "notify_in_browser": "on", "expire": "custom", "expire_minutes": "10"},
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


@pytest.mark.parametrize(
    ("fields", "seconds"),
    [
        ({"expire": ""}, None),
        ({"expire": "0"}, 0),
        ({"expire": "900"}, 900),
        ({"expire": "86400"}, 86400),
        ({"expire": "custom", "expire_minutes": "90"}, 5400),
    ],
)
def test_the_deadline_picker_stores_seconds(client, user, fields, seconds):
    client.force_login(user)
    response = client.post(reverse("accounts:preferences"), {"theme": "system", **fields})
    assert response.status_code == 302
    assert Preferences.objects.get(user=user).question_expire_after == seconds


def test_a_stored_deadline_shows_as_its_choice(client, user):
    Preferences.objects.create(user=user, question_expire_after=3600)
    client.force_login(user)
    assert client.get(reverse("accounts:preferences")).context["form"]["expire"].value() == "3600"
    Preferences.objects.filter(user=user).update(question_expire_after=150)
    form = client.get(reverse("accounts:preferences")).context["form"]
    assert (form["expire"].value(), form["expire_minutes"].value()) == ("custom", 3)


def test_a_custom_deadline_needs_its_minutes(client, user):
    client.force_login(user)
    response = client.post(reverse("accounts:preferences"), {"theme": "system", "expire": "custom"})
    assert response.status_code == 400
    assert "Enter a number of minutes." in response.content.decode()


def test_the_language_chosen_in_settings_is_remembered(client, user):
    client.force_login(user)
    response = client.post(
        reverse("accounts:preferences"), {"theme": "system", "language": "pt-br"}, follow=True
    )
    assert client.cookies["django_language"].value == "pt-br"
    assert "Configurações salvas." in response.content.decode()


# --- From the page: each change saves at once (htmx), one save model for the whole form ----------

HTMX = {"HX-Request": "true"}


def test_a_change_from_the_page_saves_and_answers_the_saved_form_and_its_status(client, user):
    client.force_login(user)
    response = client.post(
        reverse("accounts:preferences"),
        {"theme": "dark", "language": "en", "email_questions": "on", "expire": "900"},
        headers=HTMX,
    )
    assert response.status_code == 200
    html = response.content.decode()
    assert html.lstrip().startswith('<form method="post"')
    assert '<p id="settings-status" hx-swap-oob="innerHTML">Settings saved.</p>' in html
    assert "<h1>" not in html  # the form alone, not the page
    preferences = Preferences.objects.get(user=user)
    assert (preferences.theme, preferences.email_questions) == (Theme.DARK, True)
    assert preferences.question_expire_after == 900


def test_a_refused_change_from_the_page_is_said_and_nothing_is_saved(client, user):
    client.force_login(user)
    response = client.post(
        reverse("accounts:preferences"),
        {"theme": "dark", "language": "en", "expire": "custom", "expire_minutes": "-5"},
        headers=HTMX,
    )
    assert response.status_code == 400
    html = response.content.decode()
    assert 'aria-invalid="true"' in html
    assert "Not saved: correct the field marked above." in html
    assert not Preferences.objects.filter(user=user).exists()


def test_a_new_language_from_the_page_reloads_it_in_that_language(client, user):
    client.force_login(user)
    response = client.post(
        reverse("accounts:preferences"), {"theme": "system", "language": "pt-br"}, headers=HTMX
    )
    assert response["HX-Refresh"] == "true"
    assert client.cookies["django_language"].value == "pt-br"
    page = client.get(reverse("accounts:preferences"))
    assert "Configurações salvas." in page.content.decode()
