"""The modals that answer what one click cannot (views.open, from a message's button): a
question's answer form (several questions, multi-select, typed answers) and Deny with
feedback; and what their submission (view_submission) answers."""

import json

from django.utils.translation import gettext as _

from questions.models import Question, QuestionKind
from questions.payloads import Answer, FormField, form_fields
from questions.schemas import AskedQuestion
from slackbot.blocks import ANSWER_VIEW, DENY_VIEW, FORM_VIEW, LIMITS, cut, plain
from slackbot.payloads import StateValue

FEEDBACK_BLOCK = "feedback"
TYPED = "typed"
CHOSEN = "chosen"


def modal(*, callback_id: str, question: Question, title: str, submit: str, blocks: list) -> dict:
    metadata = json.dumps({"q": question.pk})
    return {
        "type": "modal",
        "callback_id": callback_id,
        "private_metadata": metadata,
        "title": plain(title, LIMITS["modal_title"]),
        "submit": plain(submit, LIMITS["modal_button"]),
        "close": plain(_("Cancel"), LIMITS["modal_button"]),
        "blocks": blocks[: LIMITS["blocks"]],
    }


def answer_view(question: Question) -> dict:
    """A tool's form, or the answer form of a question."""
    if question.kind == QuestionKind.ELICITATION:
        return form_view(question)
    return question_view(question)


def question_view(question: Question) -> dict:
    """The form of a question: for each asked question, its options (checkboxes for a
    multi-select, radio buttons else) and a text box where typed answers are allowed."""
    blocks: list[dict] = []
    for index, asked in enumerate(question.request.questions):
        blocks += question_inputs(index, asked)
    return modal(
        callback_id=ANSWER_VIEW,
        question=question,
        title=_("Answer"),
        submit=_("Send"),
        blocks=blocks,
    )


def question_inputs(index: int, asked: AskedQuestion) -> list[dict]:
    label = "\n".join(part for part in (asked.header, asked.text) if part)
    blocks = []
    if asked.options:
        options = [
            {
                "text": plain(option.label, LIMITS["option_text"]),
                "value": str(number),
                **(
                    {"description": plain(option.description, LIMITS["option_text"])}
                    if option.description
                    else {}
                ),
            }
            for number, option in enumerate(asked.options[: LIMITS["options"]])
        ]
        element = {
            "type": "checkboxes" if asked.multiple else "radio_buttons",
            "action_id": CHOSEN,
            "options": options,
        }
        blocks.append(
            {
                "type": "input",
                "block_id": f"q{index}",
                "label": plain(label, LIMITS["label"]),
                "element": element,
                "optional": asked.custom or asked.multiple,
            }
        )
    if asked.custom:
        blocks.append(
            {
                "type": "input",
                "block_id": f"q{index}-custom",
                "label": plain(_("Your own answer") if asked.options else label, LIMITS["label"]),
                "element": {"type": "plain_text_input", "action_id": TYPED, "multiline": True},
                "optional": bool(asked.options),
            }
        )
    return blocks


def deny_view(question: Question) -> dict:
    """Deny an approval, with what the agent should be told."""
    blocks = [
        {"type": "section", "text": plain(cut(question.summary, LIMITS["section_text"]))},
        {
            "type": "input",
            "block_id": FEEDBACK_BLOCK,
            "label": plain(_("Feedback for the agent")),
            "element": {"type": "plain_text_input", "action_id": TYPED, "multiline": True},
            "optional": True,
        },
    ]
    return modal(
        callback_id=DENY_VIEW, question=question, title=_("Deny"), submit=_("Deny"), blocks=blocks
    )


def submitted_answers(question: Question, values: dict[str, dict[str, StateValue]]) -> list[Answer]:
    """One Answer per asked question from a submitted answer form's state."""
    answers = []
    for index, asked in enumerate(question.request.questions):
        chosen = values.get(f"q{index}", {}).get(CHOSEN)
        numbers = chosen.chosen_values() if chosen is not None else []
        labels = [
            asked.options[int(n)].label
            for n in numbers
            if n.isdigit() and int(n) < len(asked.options)
        ]
        typed = values.get(f"q{index}-custom", {}).get(TYPED)
        answers.append(Answer(labels=labels, custom=(typed.value or "") if typed else ""))
    return answers


def submitted_feedback(values: dict[str, dict[str, StateValue]]) -> str:
    typed = values.get(FEEDBACK_BLOCK, {}).get(TYPED)
    return (typed.value or "") if typed else ""


# A tool's form (an elicitation): one input per field, its value read back by field.
FIELD = "value"


def form_view(question: Question) -> dict:
    """A running tool's form: each field as Slack's nearest input (text, number, a switch,
    a choice or several)."""
    request = question.elicitation
    fields = form_fields(request.requested_schema, request.order)
    blocks = [{"type": "section", "text": plain(request.message or question.summary)}]
    blocks += [field_input(index, field) for index, field in enumerate(fields)]
    return modal(
        callback_id=FORM_VIEW, question=question, title=_("Answer"), submit=_("Send"), blocks=blocks
    )


def field_input(index: int, field: FormField) -> dict:
    label = plain(field.label, LIMITS["label"])
    options = [
        {"text": plain(choice.title or choice.value, LIMITS["option_text"]), "value": choice.value}
        for choice in field.choices[:100]
    ]
    if field.kind == "boolean":
        element = {"type": "checkboxes", "options": [{"text": label, "value": "true"}]}
    elif field.kind in ("number", "integer"):
        element = {"type": "number_input", "is_decimal_allowed": field.kind == "number"}
    elif field.kind == "enum":
        element = {"type": "static_select", "options": options}
    elif field.kind == "array":
        element = {"type": "multi_static_select", "options": options}
    else:
        element = {"type": "plain_text_input", "multiline": field.long_text}
    element["action_id"] = FIELD
    block = {"type": "input", "block_id": f"f{index}", "label": label, "element": element}
    block["optional"] = field.kind == "boolean" or not field.required
    if field.description:
        block["hint"] = plain(field.description, LIMITS["label"])
    return block


def submitted_form(question: Question, values: dict[str, dict[str, StateValue]]) -> dict:
    """A submitted tool's form as questions.resolving.answer_elicitation reads it."""
    request = question.elicitation
    given: dict = {}
    for index, field in enumerate(form_fields(request.requested_schema, request.order)):
        state = values.get(f"f{index}", {}).get(FIELD)
        if state is None:
            continue
        chosen = state.chosen_values()
        if field.kind == "boolean":
            given[field.name] = "true" if chosen else ""
        elif field.kind == "enum":
            given[field.name] = chosen[0] if chosen else None
        elif field.kind == "array":
            given[field.name] = chosen
        else:
            given[field.name] = state.value
    return given
