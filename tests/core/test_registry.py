"""The one pattern apps use to contribute to a lower layer (docs/developers/architecture.md,
"Extension points")."""

from core.registry import Registry


def test_values_come_back_in_the_order_they_were_added_and_a_key_replaces_in_place():
    channels = Registry("channels")
    channels.add("smtp", key="email")
    channels.add("vapid", key="push")
    channels.add("ses", key="email")

    assert list(channels) == ["ses", "vapid"]
    assert channels.get("email") == "ses"
    assert "push" in channels and "sms" not in channels


def test_a_value_without_a_key_is_added_once():
    jobs = Registry("jobs")

    def sweep():
        pass

    assert jobs.add(sweep) is sweep
    jobs.add(sweep)

    assert list(jobs) == [sweep]


def test_added_puts_back_what_was_there_after_the_block():
    tools = Registry("tools")
    tools.add("calculator", key="calculate")

    with tools.added("fake", key="calculate"), tools.added("echo", key="echo"):
        assert list(tools) == ["fake", "echo"]

    assert list(tools) == ["calculator"]


def test_adding_while_iterating_does_not_disturb_the_iteration():
    hooks = Registry("hooks")
    hooks.add("first", key=1)
    seen = []
    for value in hooks:
        seen.append(value)
        hooks.add("second", key=2)

    assert seen == ["first"]
    assert list(hooks) == ["first", "second"]
