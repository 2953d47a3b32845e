"""Search over conversation titles and message text: PostgreSQL's full-text search there, a
substring match on SQLite (the suite runs on both: `make test`)."""

import pytest
from django.contrib.postgres.search import SearchQuery
from django.db import OperationalError, connection
from django.test import Client
from django.urls import reverse

from chat import services
from chat.errors import SearchTooSlow
from chat.models import SEARCH_CONFIG, Message, Role
from chat.selectors import statement_timed_out, statement_timeout
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
    return [c.title for c in services.search_conversations(user=user, query=query)]


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


def search(client, query, view="chat:conversation_search"):
    return client.get(reverse(view), {"q": query})


def test_a_nul_or_other_control_character_in_a_search_is_dropped(client, user, chats):
    client.force_login(user)
    for view in ("chat:conversation_search", "chat:conversation_list"):
        assert search(client, "\x00", view).status_code == 200
        response = search(client, "piz\x00za\x1b", view)
        assert response.status_code == 200
        assert "Lunch plans" in response.content.decode()


def test_a_search_longer_than_the_limit_is_refused_and_says_so(client, user, chats):
    client.force_login(user)
    too_long = "pizza " * (services.SEARCH_MAX_CHARS // 6 + 1)
    for view in ("chat:conversation_search", "chat:conversation_list"):
        response = search(client, too_long, view)
        assert response.status_code == 400
        html = response.content.decode()
        assert 'role="alert">Search for at most 200 characters.<' in html
        assert "Lunch plans" not in html
    assert search(client, too_long[: services.SEARCH_MAX_CHARS]).status_code == 200


def test_searches_are_limited_per_user_and_the_refusal_says_when_to_try_again(
    client, user, other_user, chats, settings, one_minute
):
    settings.PARLEY_SEARCHES_PER_MINUTE = 2
    client.force_login(user)
    assert [search(client, "pizza").status_code for _ in range(2)] == [200, 200]
    refused = search(client, "pizza")
    assert refused.status_code == 429 and int(refused["Retry-After"]) >= 1
    assert "You searched too often in a minute." in refused.content.decode()
    # Opening pages, which list the recent conversations without searching, still works.
    assert client.get(reverse("chat:conversation_list")).status_code == 200
    client.force_login(other_user)
    assert search(client, "pizza").status_code == 200


def test_a_search_that_takes_too_long_says_so(client, user, chats, monkeypatch):
    def too_slow(**_):
        raise SearchTooSlow

    monkeypatch.setattr(services, "search_conversations_for_user", too_slow)
    client.force_login(user)
    response = search(client, "pizza")
    assert response.status_code == 400
    assert "That search took too long. Try more specific words." in response.content.decode()


@pytest.mark.skipif(connection.vendor != "postgresql", reason="PostgreSQL's text search")
def test_message_search_reads_the_gin_index_of_the_stored_words(chats):
    with connection.cursor() as cursor:
        cursor.execute("SET LOCAL enable_seqscan = off")  # a few rows: make the index count
    words = SearchQuery("pizza", search_type="websearch", config=SEARCH_CONFIG)
    plan = Message.objects.filter(search_vector=words).explain()
    assert "message_search_vector" in plan


@pytest.mark.skipif(connection.vendor != "postgresql", reason="PostgreSQL's statement_timeout")
def test_a_statement_past_the_search_timeout_is_cancelled(db):
    with (
        pytest.raises(OperationalError) as raised,
        statement_timeout(0.05),
        connection.cursor() as cursor,
    ):
        cursor.execute("SELECT pg_sleep(2)")
    assert statement_timed_out(raised.value)
    with connection.cursor() as cursor:  # and the timeout ended with the search
        cursor.execute("SHOW statement_timeout")
        assert cursor.fetchone() == ("0",)


def test_a_user_runs_one_search_at_a_time_and_others_search_meanwhile(
    client, user, other_user, chats, monkeypatch
):
    """A second search of the user's while one runs is refused; another user's is not."""
    answers = []
    search_for_user = services.search_conversations_for_user

    def meanwhile(**options):
        if not answers:  # while the user's first search runs
            answers.append(search(client, "pizza"))
            other = Client()
            other.force_login(other_user)
            answers.append(search(other, "pizza"))
        return search_for_user(**options)

    monkeypatch.setattr(services, "search_conversations_for_user", meanwhile)
    client.force_login(user)
    assert search(client, "pizza").status_code == 200
    refused, others = answers
    assert refused.status_code == 429 and refused["Retry-After"] == "1"
    assert "Your previous search is still running." in refused.content.decode()
    assert others.status_code == 200
    assert search(client, "pizza").status_code == 200  # and once it ended, the next runs


def test_a_search_marks_its_words_in_what_it_found(client, user, chats):
    client.force_login(user)
    html = search(client, "lunch").content.decode()
    assert '<span class="sidebar-title"><mark>Lunch</mark> plans</span>' in html
    html = search(client, "PIZZA").content.decode()
    assert "margherita <mark>pizza</mark> again" in html  # the snippet, whatever the case
    html = search(client, "lisbon", "chat:conversation_list").content.decode()
    assert "Trip to <mark>Lisbon</mark>" in html


def test_a_marked_result_is_still_escaped(client, user):
    services.create_conversation(owner=user, title="<b>pizza</b> & co")
    client.force_login(user)
    html = search(client, "pizza").content.decode()
    assert "&lt;b&gt;<mark>pizza</mark>&lt;/b&gt; &amp; co" in html
