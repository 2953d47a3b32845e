"""Search over conversation titles and message text: PostgreSQL's full-text search there, a
substring match on SQLite (the suite runs on both: `make test`)."""

import pytest
from django.db import connection
from django.urls import reverse

from chat import services
from chat.models import Role
from chat.selectors import search_conversations_for_user
from tests.factories import add_message

# Also run on PostgreSQL (make test): full-text search on PostgreSQL, a substring match on SQLite.
pytestmark = [pytest.mark.django_db, pytest.mark.postgres]


@pytest.fixture
def chats(user, other_user):
    lunch = services.create_conversation(owner=user, title="Lunch plans")
    add_message(lunch.pk, "We could order the margherita pizza again", role=Role.USER)
    travel = services.create_conversation(owner=user, title="Trip to Lisbon")
    add_message(travel.pk, "Book the train, not the flight.")
    theirs = services.create_conversation(owner=other_user, title="Pizza night")
    add_message(theirs.pk, "pizza pizza pizza", role=Role.USER)
    return lunch, travel, theirs


def found(user, query):
    return [c.title for c in search_conversations_for_user(user=user, query=query)]


def test_a_word_inside_a_message_finds_its_conversation_and_only_the_users(user, chats):
    assert found(user, "pizza") == ["Lunch plans"]
    assert found(user, "TRAIN") == ["Trip to Lisbon"]
    assert found(user, "lisbon") == ["Trip to Lisbon"]
    assert found(user, "sushi") == []
    assert found(user, "  ") == ["Trip to Lisbon", "Lunch plans"]


def test_text_added_later_and_edited_text_are_found(user, chats):
    _, travel, _ = chats
    message_id = add_message(travel.pk, "Maybe a ferry instead")
    assert found(user, "ferry") == ["Trip to Lisbon"]
    add_message(travel.pk, "Actually, the bus", message_id=message_id)
    assert found(user, "ferry") == []
    assert found(user, "bus") == ["Trip to Lisbon"]


def test_the_search_follows_the_database(user, chats):
    if connection.vendor == "postgresql":
        # Full-text search: whole words in any order, web-search syntax (-word excludes).
        assert found(user, "pizza margherita") == ["Lunch plans"]
        assert found(user, "order -pizza") == []
        assert found(user, '"train not"') == ["Trip to Lisbon"]  # a phrase, stop words kept
        assert found(user, "pizz") == []  # words, not parts of words, in messages
        assert found(user, "Lisb") == ["Trip to Lisbon"]  # ...but titles match parts too
    else:
        # A case-insensitive substring of the title or of a message.
        assert found(user, "margherita pizza") == ["Lunch plans"]
        assert found(user, "pizz") == ["Lunch plans"]
        assert found(user, "pizza margherita") == []


def test_the_sidebar_search_returns_its_list(client, user, chats):
    client.force_login(user)
    html = client.get(reverse("chat:conversation_search"), {"q": "pizza"}).content.decode()
    assert html.lstrip().startswith('<div id="sidebar-list"')
    assert ">Lunch plans</span>" in html
    assert "Trip to Lisbon" not in html
    assert "Found: 1" in html
    html = client.get(reverse("chat:conversation_search"), {"q": "sushi"}).content.decode()
    assert "Nothing matches your search." in html


def test_the_list_page_searches_without_javascript(client, user, chats):
    client.force_login(user)
    html = client.get(reverse("chat:conversation_list"), {"q": "train"}).content.decode()
    assert "Trip to Lisbon" in html
    assert "Lunch plans" not in html
    assert 'value="train"' in html
