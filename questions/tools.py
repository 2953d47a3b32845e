"""The question tools as the model sees them: names, guidance and JSON schemas."""

from django.conf import settings

from chat.tools import AgentContext, ToolSpec, json_schema
from questions.schemas import (
    QUESTION_TOOL_NAMES,
    TOOL_ASK_USER_QUESTION,
    TOOL_CONFIRM_ACTION,
    TOOL_QUESTION,
    AskUserQuestionInput,
    ConfirmActionInput,
    QuestionInput,
)

WHEN = (
    "Ask only when you cannot reasonably proceed without the user: the request is ambiguous, "
    "there are several valid approaches and their preference matters, or a decision is "
    "costly to undo. Do NOT ask when you can make a sensible default choice, when the "
    "question is trivial, when the user already said what they want, or about something you "
    "already asked. Asking ends your turn: the conversation pauses until the user answers, "
    "and the answer comes back as this tool's result. Call it alone, as the only tool call "
    "of your message."
)

DESCRIPTIONS = {
    TOOL_QUESTION: (
        "Ask the user one question, with up to 10 short options to pick from (one, or "
        "several with multiple=true); the user may also type their own answer unless "
        "custom=false. With no options it is a free-form question. Prefer options: "
        "'Which database? PostgreSQL / MySQL / SQLite' beats 'What database do you want?'. "
        "The result is the answer text: the chosen label(s), one per line, typed text last. " + WHEN
    ),
    TOOL_ASK_USER_QUESTION: (
        "Ask the user 1-4 related clarifying questions at once, each with 2-4 options "
        "(multiSelect for several); users can also type custom answers. The result is JSON: "
        '{"answers": {"<question text>": "<label or typed text>" or [labels]}}. '
        "NOT available to sub-agents. " + WHEN
    ),
    TOOL_CONFIRM_ACTION: (
        "Ask the user to confirm an action before you take it: deleting files or data, "
        "breaking changes, anything hard to undo or affecting production. Describe the action "
        "and its consequences in details. The result is JSON: "
        '{"confirmed": true} or {"confirmed": false}; do the action only when confirmed. ' + WHEN
    ),
}

INPUTS = {
    TOOL_QUESTION: QuestionInput,
    TOOL_ASK_USER_QUESTION: AskUserQuestionInput,
    TOOL_CONFIRM_ACTION: ConfirmActionInput,
}


def enabled() -> list[str]:
    """The question tools offered, per QUESTION_TOOLS (unknown names are ignored)."""
    return [name for name in settings.QUESTION_TOOLS if name in QUESTION_TOOL_NAMES]


def is_question_call(name: str) -> bool:
    return name in enabled()


def specs(context: AgentContext) -> list[ToolSpec]:
    """Sub-agents are never offered question tools."""
    if context.is_subagent:
        return []
    return [ToolSpec(name, DESCRIPTIONS[name], json_schema(INPUTS[name])) for name in enabled()]
