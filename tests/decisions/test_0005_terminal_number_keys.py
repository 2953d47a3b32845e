"""docs/developers/decisions/0005-terminal-number-keys.md: what the terminal client's number
keys rely on in questionary. Each check names the part that changed."""

import questionary
from prompt_toolkit.input import create_pipe_input
from prompt_toolkit.keys import Keys
from prompt_toolkit.output import DummyOutput
from questionary.prompts.common import InquirerControl

from terminal.prompts import numbered_choices, with_number_keys


def controls(question: questionary.Question) -> list[InquirerControl]:
    return [
        window.content
        for window in question.application.layout.find_all_windows()
        if isinstance(window.content, InquirerControl)
    ]


def test_a_select_and_a_checkbox_each_have_one_inquirer_control_with_the_attributes_used():
    with create_pipe_input() as keys:
        for question in (
            questionary.select(
                "Pick", numbered_choices([("A", 1), ("B", 2)]), input=keys, output=DummyOutput()
            ),
            questionary.checkbox(
                "Tick", numbered_choices([("A", 1), ("B", 2)]), input=keys, output=DummyOutput()
            ),
        ):
            (control,) = controls(question)
            assert hasattr(control, "use_shortcuts"), "InquirerControl.use_shortcuts is gone"
            assert hasattr(control, "pointed_at"), "InquirerControl.pointed_at is gone"


def test_number_keys_answer_a_select_and_tick_a_checkbox():
    with create_pipe_input() as keys:
        select = questionary.select(
            "Pick",
            numbered_choices([("A", 1), ("B", 2), ("C", 3)]),
            input=keys,
            output=DummyOutput(),
        )
        with_number_keys(select, Keys.ControlM)
        keys.send_text("2")
        assert select.unsafe_ask() == 2, "a number key no longer answers a select"

    with create_pipe_input() as keys:
        checkbox = questionary.checkbox(
            "Tick",
            numbered_choices([("A", 1), ("B", 2), ("C", 3)]),
            input=keys,
            output=DummyOutput(),
        )
        with_number_keys(checkbox, " ")
        keys.send_text("13\r")
        assert checkbox.unsafe_ask() == [1, 3], "number keys no longer tick a checkbox"
