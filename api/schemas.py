"""What the API reads and returns, as the OpenAPI document declares it: the request bodies,
the responses (api.results builds their data), and the error responses the endpoints share."""

from datetime import datetime
from typing import Annotated, Any, Literal

from ninja import Field, Schema
from pydantic import create_model

from chat.models import MemberRole
from questions.payloads import FormField
from questions.schemas import AskedQuestion

# Seconds a call may wait for the agent before it answers (`wait`).
MAX_WAIT = 120.0
# Messages in a page of GET /conversations/{id}/messages: by default, and at most. A
# conversation (GET /conversations/{id}) comes with the newest page of the default size.
PAGE_SIZE = 100
MAX_PAGE_SIZE = 500


class Message(Schema):
    message: str


# An asked question (questions.schemas.AskedQuestion) under the name the document has always
# given it.
class Question(AskedQuestion):
    pass


# Every error is JSON with a message (api.api's exception handlers).
ERRORS = {401: Message, 404: Message, 409: Message, 413: Message, 422: Message, 429: Message}
MEMBER_ERRORS = {**ERRORS, 400: Message, 403: Message}


class ConversationIn(Schema):
    title: str = Field("", max_length=200)


class MemberOut(Schema):
    username: str
    role: str = Field(description="owner, participant (chats and answers) or viewer (reads).")
    addedAt: str


class MemberIn(Schema):
    role: MemberRole = Field(description="participant (chats and answers) or viewer (reads).")


class ConversationOut(Schema):
    id: int
    title: str
    state: str
    seq: int = Field(description="The change cursor: pass it as Last-Event-ID to /events.")
    createdAt: str
    updatedAt: str
    role: str = Field(
        "owner",
        description="Your role in it: owner, participant (chats and answers) or viewer "
        "(reads only; everything else is a 403).",
    )


class MessageOut(Schema):
    id: int
    role: str
    order: int
    text: str
    blocks: list[dict]
    isDraft: bool
    superseded: bool = Field(
        description="Replaced by Regenerate or an edit: kept, not shown, not sent to the model."
    )
    version: int
    createdAt: str


class QuestionAudit(Schema):
    """The resolution, deadline and audit of a question, an approval or an elicitation
    (questions.selectors.AUDIT_FIELDS, by their names on the wire)."""

    questionResolution: str = Field(description="asked, replied, rejected, expired or cancelled")
    expiresAt: str | None = Field(
        None, description="When the server resolves it as expired (ISO time); null: never."
    )
    answeredBy: str | None = Field(None, description="Who resolved it (a user name).")
    answeredAt: str | None = Field(None, description="When it was resolved (ISO time).")
    answeredVia: str | None = Field(
        None, description="How: browser, api, terminal, auto-resolve, expiry, email or rule."
    )
    assignedTo: str | None = Field(
        None,
        description="The user it waits for alone, if someone assigned it; null: it waits for "
        "the conversation's owner and every participant.",
    )


def audited(schema: type[Schema]) -> type[Schema]:
    """`schema` with QuestionAudit's fields after its own, where the API has always sent and
    declared them (a subclass of QuestionAudit would put them first)."""
    # pydantic orders the fields of several bases from the last base to the first.
    return create_model(
        schema.__name__,
        __base__=(QuestionAudit, schema),
        __module__=schema.__module__,
        __doc__=schema.__doc__,
    )


@audited
class PendingQuestionOut(Schema):
    """A question the model asked (one of the three question tools)."""

    conversationId: int
    toolCallId: str
    tool: Literal["question", "ask_user_question", "confirm_action"]
    questions: list[Question]
    question: str | None = Field(None, description="The only question's text (one question).")
    options: list[str] | None = Field(None, description="Its option labels (one question).")


class RuleNoteOut(Schema):
    id: str = Field(description="The rule's id: a number, or config:… for MCP_CONFIG's.")
    scope: Literal["deployment", "user", "conversation"]
    label: str = Field(description="What names it to a person: its globs, else its tool.")
    effect: Literal["allow", "ask", "deny"]
    usesLeft: int | None = Field(None, description="Uses it had left; null: unlimited.")
    created: bool = Field(False, description="Always allow kept it (it decided nothing).")


class ApprovalDetail(Schema):
    name: str = Field(description="The tool's name as the model calls it: mcp__<server>__<tool>.")
    server: str = Field(description="The MCP server (its name in MCP_CONFIG).")
    tool: str = Field(description="The tool's own name on its server.")
    agent: str = Field(
        "",
        description='The agent CLI that asks through its permission hook ("claude-code", '
        '"codex"; its calls have no MCP server: `server` is empty); empty for Parley\'s own agent.',
    )
    title: str = Field(description="The tool's title, else its name.")
    description: str
    arguments: dict[str, Any] = Field(description="The arguments the model called it with.")
    inputSchema: dict[str, Any] = Field(
        description="The tool's input schema (JSON Schema): edited arguments must fit it."
    )
    argumentsDigest: str = Field(
        description="The digest of `arguments`, which deciding a step's approvals together "
        "(POST /conversations/{id}/approvals) binds each decision to."
    )
    subagentNumber: int | None = Field(
        None,
        description="A sub-agent's call: its number in the conversation's sub-agents (it "
        "waits for this decision as it runs); null for the conversation's own agent.",
    )
    subagent: str = Field("", description="A sub-agent's call: the sub-agent's title.")


@audited
class ApprovalOut(Schema):
    """May the agent call this tool from an MCP server with these arguments?"""

    conversationId: int
    toolCallId: str = Field(description="The tool call it is about.")
    tool: Literal["tool_approval"]
    approval: ApprovalDetail
    decision: Literal["allow", "always", "deny"] | None = Field(
        None, description="How it was decided; null while pending, expired or cancelled."
    )
    editedArguments: dict[str, Any] | None = Field(
        None, description="The arguments allowed instead of the model's; null: not edited."
    )
    stoppedBy: str | None = Field(
        None,
        description="Denied with another call of its step (the conversation's \"a deny stops "
        "the step\"): that call's title; null otherwise.",
    )
    feedback: str = Field("", description="What the person told the model with Deny.")
    rule: RuleNoteOut | None = Field(
        None,
        description="The approval rule that decided the call without asking (answeredVia "
        "rule), or the one Always allow kept (`created`); null: none.",
    )


class ElicitationDetail(Schema):
    server: str = Field(description="The MCP server that asks.")
    tool: str = Field("", description="Its tool that is running and waits for the answer.")
    callId: str = Field(description="That tool's call in the transcript.")
    message: str = Field(description="What the server asks, in its own words.")
    mode: Literal["form", "url"] = Field(
        description="form: answer with values for `fields`; url: open `url`, then accept."
    )
    url: str = ""
    fields: list[FormField] = Field(
        description="The form, in order: name, kind (string, number, integer, boolean or "
        "enum), title, description, required, default, minimum, maximum, minLength, "
        "maxLength, format and, for an enum, choices ({value, title})."
    )


@audited
class ElicitationOut(Schema):
    """A running tool from an MCP server asks for values (a form) or to open a link; it waits
    for the answer while the turn runs."""

    conversationId: int
    toolCallId: str = Field(description="This request's id in the conversation.")
    tool: Literal["elicitation"]
    elicitation: ElicitationDetail
    action: Literal["accept", "decline", "cancel"] | None = Field(
        None, description="How it was answered; null while pending or when it expired."
    )
    content: dict[str, Any] | None = Field(None, description="The values sent with accept.")


# Whatever waits for a person, told apart by `tool`.
AnyQuestionOut = Annotated[
    PendingQuestionOut | ApprovalOut | ElicitationOut, Field(discriminator="tool")
]
PENDING_QUESTIONS = Field(
    description="Everything that waits for an answer now, in the order asked: the paused "
    "turn's question or approvals (several approvals of one step wait together), and the "
    "elicitations of a tool that is running."
)
PENDING_QUESTION = Field(
    None,
    description="What the paused turn waits for (the first of `pendingQuestions`); null "
    "unless the agent's state is awaiting_user.",
)


class SubagentOut(ConversationOut):
    toolCallId: str = Field(description="The parent's spawn_agents call that started it.")
    number: int = Field(description="Its task's place in that call, from 1.")
    status: str = Field(description="running, done, failed or stopped")
    superseded: bool = Field(
        description="Its spawn_agents call was replaced by Regenerate or an edit: kept for the "
        "record, like the call's message, but no longer part of the conversation."
    )
    messages: list[MessageOut]


class MessagePage(Schema):
    messages: list[MessageOut] = Field(
        description="Consecutive messages of the conversation, in transcript order (ascending "
        "`order`), superseded ones included."
    )
    before: int | None = Field(
        description="Pass it as ?before= for the messages just older than these; null when "
        "there are none (these start the transcript, or the page is empty)."
    )
    after: int | None = Field(
        description="Pass it as ?after= for the messages just newer than these; null when there "
        "are none yet (these end the transcript, or the page is empty)."
    )


class ConversationDetail(ConversationOut):
    pendingQuestion: AnyQuestionOut | None = PENDING_QUESTION
    pendingQuestions: list[AnyQuestionOut] = PENDING_QUESTIONS
    messages: list[MessageOut] = Field(
        description=f"The newest messages (at most {PAGE_SIZE}), in transcript order, "
        "superseded ones included."
    )
    messagesBefore: int | None = Field(
        description="Pass it as ?before= to GET /conversations/{id}/messages for the older "
        "messages; null when `messages` is the whole transcript."
    )
    children: list[SubagentOut] = Field(
        description="The sub-agents this conversation's agent started, in order."
    )


class AgentResult(Schema):
    status: str = Field(description="complete, needs_input, running, interrupted or error")
    conversationId: int
    response: str
    pendingQuestion: AnyQuestionOut | None = PENDING_QUESTION
    pendingQuestions: list[AnyQuestionOut] = PENDING_QUESTIONS
    messages: list[MessageOut]


class PostMessage(Schema):
    content: str = Field(max_length=200_000)
    wait: float = Field(0, ge=0, le=MAX_WAIT, description="Seconds to wait for the agent.")


class Respond(Schema):
    answers: dict[str, str | list[str]] = Field(
        description="Question text -> the chosen label, typed text, or a list of labels."
    )
    toolCallId: str | None = Field(None, description="Refuse if another question is pending.")
    wait: float = Field(0, ge=0, le=MAX_WAIT)


class Cancel(Schema):
    wait: float = Field(0, ge=0, le=MAX_WAIT)


class Decide(Schema):
    decision: Literal["allow", "always", "deny"] = Field(
        description="allow: run the call once; always: run it, and keep the narrowest rule "
        "that allows this call again (these arguments, or this command's prefix) in the turns "
        "you start, in this conversation unless `widen` (not in someone else's turn in a "
        "shared conversation); deny: do not run it."
    )
    widen: bool = Field(
        False, description="With always: the rule counts in all your conversations."
    )
    arguments: dict[str, Any] | None = Field(
        None,
        description="With allow or always: the arguments to run it with instead of the "
        "model's; they must fit the tool's input schema.",
    )
    feedback: str | None = Field(None, description="With deny: what to tell the model.")
    wait: float = Field(0, ge=0, le=MAX_WAIT, description="Seconds to wait for the agent.")


class DecideAll(Schema):
    decision: Literal["allow", "deny"] = Field(
        description="allow: run every one of these calls once; deny: run none of them."
    )
    calls: dict[str, str] = Field(
        description="Each waiting approval of one step to decide, by its `toolCallId`, with "
        "the `argumentsDigest` you saw: if any differs, or was decided meanwhile, nothing is.",
        min_length=1,
        max_length=100,
    )
    wait: float = Field(0, ge=0, le=MAX_WAIT, description="Seconds to wait for the agent.")


class Elicit(Schema):
    action: Literal["accept", "decline", "cancel"] = Field(
        description="accept: send `content` (form) or say the link was opened (url); decline: "
        "refuse; cancel: dismiss without deciding."
    )
    content: dict[str, Any] | None = Field(
        None,
        description="With accept, for a form: field name -> value (a string, number or "
        "boolean; an enum's choice by its value; for an array, a list of its choices' values, "
        "each once). Optional fields may be left out.",
    )
    wait: float = Field(0, ge=0, le=MAX_WAIT, description="Seconds to wait for the agent.")


# --- Approval rules (questions.rules) ------------------------------------------------------------


class RuleOut(Schema):
    """An approval rule (spec 6.3): the deployment's (read-only but for staff; `id` null for
    MCP_CONFIG's), or the user's own."""

    id: int | None = Field(description="null: a rule of MCP_CONFIG, changed only there.")
    scope: Literal["deployment", "user", "conversation"]
    conversationId: int | None = None
    agent: Literal["parley", "claude-code", "codex"] | None = None
    server: str | None = Field(None, description="The MCP server's name; null: any.")
    tool: str = Field(description="The tool's own name (write_note, Bash), or a glob on it.")
    match: dict[str, str] = Field(description="Argument name -> glob on its value; all must match.")
    effect: Literal["allow", "ask", "deny"]
    expiresAt: datetime | None = None
    maxUses: int | None = None
    uses: int = Field(description="How many calls it decided (a shadow rule: would have).")
    shadow: bool
    quorum: int | Literal["all"] = Field(
        1,
        description="An ask rule's two-person approval: how many people must allow (never "
        'the one who started the turn), or "all" of `approvers`.',
    )
    approvers: list[str] = Field(
        default_factory=list,
        description="Who may give that Allow (user names); empty: anyone who may act in the "
        "conversation.",
    )
    createdAt: datetime | None = None
    createdBy: str | None = None
