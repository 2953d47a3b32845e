"""Asking the person at the terminal: in a terminal with questionary (arrow keys, Space, Enter),
in a pipe by typed words and numbers, where a reply that does not fit is explained and asked
again.

Ctrl+C reaches the caller as KeyboardInterrupt (it rejects, denies or cancels what is asked),
Ctrl+D or the end of a pipe as EOFError.
"""

import sys
from collections.abc import Callable, Collection
from dataclasses import dataclass
from typing import Any

import questionary
from prompt_toolkit.keys import Keys
from questionary.prompts.common import InquirerControl

from terminal.render import Screen
from terminal.text import shown_line


@dataclass(frozen=True)
class Parsed:
    """A reply read: its value, or what is wrong with it."""

    value: Any = None
    problem: str | None = None


def select(title: str, choices: list[tuple[str, Any]], *, default=None, instruction=None):
    """One of `choices` ((title, value)) with the arrow keys and Enter, from `default`'s."""
    options = [questionary.Choice(title=t, value=v) for t, v in choices]
    start = next((o for o in options if o.value == default and default is not None), None)
    return questionary.select(
        title, choices=options, default=start, instruction=instruction
    ).unsafe_ask()


# Number keys pick the first nine choices of a question, as on the page; a tenth and later one
# has no key (the arrow keys reach it).
NUMBER_KEYS = 9


class NumberedChoice(questionary.Choice):
    """A choice shown after its number key ("2) "), or after as much space when it has none."""

    def get_shortcut_title(self) -> str:
        return f"{self.shortcut_key}) " if self.shortcut_key else "   "


def numbered_choices(
    choices: list[tuple[str, Any]], checked: Collection = ()
) -> list[NumberedChoice]:
    """`choices` ((title, value)), the first nine with their number keys; those whose value is
    in `checked` start ticked (in a checkbox)."""
    return [
        NumberedChoice(
            title=t,
            value=v,
            shortcut_key=str(n) if n <= NUMBER_KEYS else False,
            checked=v in checked,
        )
        for n, (t, v) in enumerate(choices, 1)
    ]


def number_keys(count: int) -> str:
    """The number keys of `count` choices, as a hint says them: "1", "1-4", at most "1-9"."""
    last = min(count, NUMBER_KEYS)
    return "1" if last == 1 else f"1-{last}"


def with_number_keys(question: questionary.Question, key: Keys | str) -> questionary.Question:
    """`question` (a select or a checkbox of `numbered_choices`) with its choices' numbers
    shown, and each number key pointing at its choice, then doing what `key` does there (Enter
    answers a select, Space ticks or unticks a checkbox's choice)."""
    app = question.application
    control = next(
        window.content
        for window in app.layout.find_all_windows()
        if isinstance(window.content, InquirerControl)
    )
    control.use_shortcuts = True  # each choice shows its number
    act = app.key_bindings.get_bindings_for_keys((key,))[-1].handler

    def bind(index: int, number: str) -> None:
        @app.key_bindings.add(number, eager=True)
        def press(event) -> None:
            control.pointed_at = index
            act(event)

    for index, choice in enumerate(control.choices):
        if choice.shortcut_key:
            bind(index, choice.shortcut_key)
    return question


def select_by_number(title: str, choices: list[tuple[str, Any]]):
    """One of `choices` ((title, value)): its number key, or the arrow keys and Enter."""
    hint = f"({number_keys(len(choices))} to answer, or arrow keys and Enter)"
    question = questionary.select(title, choices=numbered_choices(choices), instruction=hint)
    return with_number_keys(question, Keys.ControlM).unsafe_ask()


def checkbox_by_number(
    title: str, choices: list[tuple[str, Any]], validate, checked: Collection = ()
):
    """Some of `choices` ((title, value)): number keys or Space tick, Enter confirms; those in
    `checked` start ticked."""
    hint = f"({number_keys(len(choices))} or Space to tick, Enter to confirm)"
    question = questionary.checkbox(
        title, choices=numbered_choices(choices, checked), instruction=hint, validate=validate
    )
    return with_number_keys(question, " ").unsafe_ask()


def drop_typed_ahead() -> None:
    """Forget keys typed before an approval was shown (an Enter meant for something else
    must not allow a call)."""
    try:
        import termios

        termios.tcflush(sys.stdin.fileno(), termios.TCIFLUSH)
    except (ImportError, OSError, ValueError):
        pass


class Prompts:
    """The prompts every kind of request uses, in a terminal or in a pipe."""

    def __init__(self, screen: Screen) -> None:
        self.screen = screen
        self.interactive = screen.interactive

    def say(self, text: str) -> None:
        self.screen.out.write(text)

    def until_it_fits(self, read: Callable[[], str], parse: Callable[[str], Parsed]):
        """Read a reply until `parse` takes it; each that does not is explained."""
        while True:
            parsed = parse(read())
            if parsed.problem is None:
                return parsed.value
            self.say(parsed.problem)

    def word(self, prompt: str, words: dict[str, Any], problem: str):
        """In a pipe: the value of the word typed (any case), asked until it is one."""
        while True:
            reply = input(prompt).strip().lower()
            if reply in words:
                return words[reply]
            self.say(problem)

    def choose(self, title: str, choices: list[tuple[str, str]]) -> str:
        """One of `choices` ((label, value)): a select in a terminal, its word in a pipe."""
        if self.interactive:
            return select(title, choices)
        words = {label.split(":")[0].lower(): value for label, value in choices}
        hint = ", ".join(words)
        return self.word(f"{title} Type {hint}: ", words, f"Type one of: {hint}.")

    def pick(self, label: str, choices: list[tuple[str, Any]], default=None):
        """One of `choices` ((title, value)): a select in a terminal, its number in a pipe."""
        if self.interactive:
            return select(label, choices, default=default)
        self.say(label)
        for number, (title, _) in enumerate(choices, 1):
            self.say(f"  {number}) {title}")
        while True:
            reply = input(f"Number 1-{len(choices)}: ").strip()
            if reply.isdecimal() and reply.isascii() and 1 <= int(reply) <= len(choices):
                return choices[int(reply) - 1][1]
            self.say(f"Choose by number, 1-{len(choices)}.")

    def pick_several(
        self,
        label: str,
        choices: list[tuple[str, Any]],
        checked: list,
        check: Callable[[list], Parsed],
    ):
        """Some of `choices` ((title, value)), as `check` takes them (its value): ticked in a
        terminal, numbers comma-separated in a pipe (`checked` when left empty)."""
        if self.interactive:
            picked = checkbox_by_number(
                label, choices, lambda ticked: check(ticked).problem or True, checked
            )
            return check(picked).value
        self.say(label)
        for number, (title, _) in enumerate(choices, 1):
            self.say(f"  {number}) {title}")
        shown_default = ",".join(
            str(n) for n, (_, value) in enumerate(choices, 1) if value in checked
        )
        suffix = f" [{shown_default}]" if shown_default else ""
        prompt = f"Numbers 1-{len(choices)}, comma-separated{suffix}: "
        return self.until_it_fits(
            lambda: input(prompt).strip() or shown_default,
            lambda reply: numbered_values(reply, choices, check),
        )

    def yes_no(self, label: str, default: bool) -> bool:
        if self.interactive:
            return questionary.confirm(label, default=default, auto_enter=False).unsafe_ask()
        while True:
            reply = input(f"{label} (y/n) [{'y' if default else 'n'}]: ").strip().lower()
            if not reply:
                return default
            if reply in ("y", "yes", "n", "no"):
                return reply.startswith("y")
            self.say("Type y or n.")

    def text(self, label: str, default: str = "") -> str:
        """Any text, `default` when left empty."""
        if self.interactive:
            return questionary.text(label, default=default).unsafe_ask()
        return input(f"{label} ") or default

    def checked(self, label: str, default: str, parse: Callable[[str], Parsed]):
        """Text that `parse` takes, as its value: checked as it is typed in a terminal, asked
        again in a pipe (`default` when left empty)."""
        if self.interactive:
            text = questionary.text(
                f"{label}:", default=default, validate=lambda typed: parse(typed).problem or True
            ).unsafe_ask()
            return parse(text).value
        suffix = f" [{shown_line(default)}]" if default else ""
        return self.until_it_fits(lambda: input(f"{label}{suffix}: ") or default, parse)


def numbered_values(reply: str, choices: list[tuple[str, Any]], check) -> Parsed:
    """The values of the choices numbered in `reply` (comma-separated; empty: none), as
    `check` takes them."""
    picked = []
    for part in filter(None, (p.strip() for p in reply.split(","))):
        if not (part.isdecimal() and part.isascii() and 1 <= int(part) <= len(choices)):
            return Parsed(problem=f"Choose by number, 1-{len(choices)}.")
        picked.append(choices[int(part) - 1][1])
    return check(picked)
