import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from questions.schemas import QuestionRequest, clean_text, normalise


def test_question_normalises_to_one_question():
    request = normalise(
        "question",
        {
            "header": "Pizza",
            "question": "Which one?",
            "options": [{"label": "A", "description": "first"}, {"label": "B"}],
            "multiple": True,
        },
    )
    [question] = request.questions
    assert (question.header, question.text, question.labels) == ("Pizza", "Which one?", ["A", "B"])
    assert (question.multiple, question.custom) == (True, True)


def test_question_without_options_is_free_form():
    [question] = normalise("question", {"question": "Name it?"}).questions
    assert (question.options, question.custom) == ([], True)


def test_ask_user_question_keeps_every_question():
    request = normalise(
        "ask_user_question",
        {
            "questions": [
                {
                    "question": "DB?",
                    "header": "DB",
                    "options": [{"label": "PG"}, {"label": "SQLite"}],
                },
                {
                    "question": "Features?",
                    "options": [{"label": "Search"}, {"label": "Export"}],
                    "multiSelect": True,
                },
            ]
        },
    )
    assert [q.text for q in request.questions] == ["DB?", "Features?"]
    assert [q.multiple for q in request.questions] == [False, True]
    assert all(q.custom for q in request.questions)


def test_confirm_action_is_a_yes_no_question_with_a_default():
    [question] = normalise(
        "confirm_action", {"action": "Drop the table", "details": "Irreversible", "default": False}
    ).questions
    assert (question.labels, question.custom, question.default) == (["Yes", "No"], False, "No")
    assert question.details == "Irreversible"


@pytest.mark.parametrize(
    ("tool", "arguments", "problem"),
    [
        ("question", {}, "question: Field required"),
        ("question", {"question": "   "}, "must not be empty"),
        ("question", {"question": "x" * 501}, "at most 500 characters"),
        ("question", {"question": "q", "header": "h" * 31}, "header: must be at most 30"),
        ("question", {"question": "q", "options": [{"label": "l" * 31}]}, "at most 30"),
        ("question", {"question": "q", "options": [{"label": "x"}] * 11}, "at most 10 items"),
        ("question", {"question": "q", "options": [{"label": "A"}, {"label": "a"}]}, "unique"),
        ("question", {"question": "q", "custom": False}, "must allow a custom answer"),
        ("question", {"question": "q", "multiple": True}, "multiple needs options"),
        ("question", {"question": "q", "colour": "red"}, "colour: Extra inputs"),
        ("question", {"question": "q", "options": [{"label": "\u200b\U000e0041"}]}, "empty"),
        ("ask_user_question", {"questions": []}, "at least 1 item"),
        (
            "ask_user_question",
            {"questions": [{"question": "q", "options": [{"label": "a"}]}]},
            "at least 2",
        ),
        (
            "ask_user_question",
            {
                "questions": [
                    {
                        "question": "q",
                        "header": "thirteen char",
                        "options": [{"label": "a"}, {"label": "b"}],
                    }
                ]
            },
            "at most 12",
        ),
        (
            "ask_user_question",
            {"questions": [{"question": "Same?", "options": [{"label": "a"}, {"label": "b"}]}] * 2},
            "question texts must be unique",
        ),
        ("confirm_action", {"details": "x"}, "action: Field required"),
        ("question", "not an object", "Input should be a valid dictionary"),
        ("calculate", {"expression": "1+1"}, "'calculate' is not a question tool"),
    ],
)
def test_bad_calls_are_refused_with_a_readable_reason(tool, arguments, problem):
    with pytest.raises(ValueError, match=problem):
        normalise(tool, arguments)


def test_invisible_characters_are_removed_from_every_string():
    hidden = "Pick\u200b me\u202e\U000e0049\U000e0047\U000e004e"
    [question] = normalise(
        "question",
        {"question": f"Really?{hidden}", "options": [{"label": hidden, "description": hidden}]},
    ).questions
    assert question.text == "Really?Pick me"
    assert question.options[0].label == "Pick me"
    assert question.options[0].description == "Pick me"


def test_markup_is_kept_as_plain_text_not_interpreted():
    [question] = normalise("question", {"question": "<b>Bold</b> **md**"}).questions
    assert question.text == "<b>Bold</b> **md**"  # escaped when shown, never rendered


def test_clean_text_keeps_line_breaks_only_where_allowed():
    assert clean_text("a\nb\x00c\td") == "a bc d"
    assert clean_text("a \n b\x00", multiline=True) == "a\nb"


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=40),
    lambda children: (
        st.lists(children, max_size=5) | st.dictionaries(st.text(max_size=12), children, max_size=6)
    ),
    max_leaves=30,
)
plausible = st.fixed_dictionaries(
    {"question": st.text(max_size=60)},
    optional={
        "header": st.text(max_size=40),
        "options": st.lists(
            st.fixed_dictionaries(
                {"label": st.text(max_size=40)}, optional={"description": st.text()}
            ),
            max_size=12,
        ),
        "multiple": json_values,
        "custom": json_values,
        "questions": json_values,
        "action": st.text(max_size=40),
    },
)


@settings(max_examples=300, deadline=None)
@given(
    tool=st.sampled_from(["question", "ask_user_question", "confirm_action"]),
    arguments=json_values | plausible,
)
def test_any_json_yields_a_question_or_a_readable_error(tool, arguments):
    json.dumps(arguments)  # it is JSON a model could send
    try:
        request = normalise(tool, arguments)
    except ValueError as error:
        assert str(error)
    else:
        assert isinstance(request, QuestionRequest)
        assert 1 <= len(request.questions) <= 4
        for question in request.questions:
            assert question.text
            assert all(option.label for option in question.options)
            assert question.options or question.custom
