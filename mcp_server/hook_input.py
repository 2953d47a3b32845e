"""What the agent CLIs' hooks send Parley and what Parley answers them, declared once.

Claude Code posts a `PermissionRequest` (or, where a person prefers it, `PreToolUse`) hook's
input to `/hooks/claude-code/permission-request` with an `http` hook, and a `Notification`'s to
`/hooks/claude-code/notification`; Codex's command hook forwards its `PermissionRequest` input
to `/hooks/codex/permission-request`. The inputs carry no tool-call id: a decision is bound to
the session and the exact input the person saw.

Fields a newer CLI adds are ignored rather than refused (`extra="ignore"`): a refusal is a
400, which the CLI reads as "ask in the terminal", so a CLI upgrade would silently turn Parley
off. What Parley reads is required and typed; an unknown event is refused.
"""

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

CLAUDE_CODE = "claude-code"
CODEX = "codex"
# How a conversation's title names each CLI.
CLIENT_NAMES = {CLAUDE_CODE: "Claude Code", CODEX: "Codex"}

PERMISSION_REQUEST = "PermissionRequest"
PRE_TOOL_USE = "PreToolUse"
NOTIFICATION = "Notification"

ALLOW = "allow"
DENY = "deny"

# Claude Code's own question tool: asked as a Parley question, answered through updatedInput.
ASK_USER_QUESTION = "AskUserQuestion"


class _Input(BaseModel):
    model_config = ConfigDict(extra="ignore", frozen=True)

    session_id: str = Field(min_length=1, max_length=200)
    cwd: str = Field(default="", max_length=4096)
    transcript_path: str = ""


class ToolHookInput(_Input):
    """A tool call that asks for permission: Claude Code's PermissionRequest and PreToolUse,
    Codex's PermissionRequest (which adds `turn_id`)."""

    hook_event_name: Literal["PermissionRequest", "PreToolUse"]
    tool_name: str = Field(min_length=1, max_length=200)
    tool_input: dict[str, Any]
    permission_mode: str = ""
    # The CLI's own suggestions for "don't ask again": read, never handed back as a grant.
    permission_suggestions: list[Any] = []
    turn_id: str = ""


class NotificationInput(_Input):
    """Claude Code's Notification hook: "Claude needs your permission to use Bash", or idle."""

    hook_event_name: Literal["Notification"]
    message: str = Field(max_length=10_000)
    title: str = Field(default="", max_length=500)
    notification_type: str = Field(default="", max_length=100)


def no_decision() -> dict:
    """The answer that decides nothing: the CLI asks in its terminal (interactive) or denies
    (Claude Code's print mode). Never an allow."""
    return {}


def decision(
    event: str,
    behavior: str,
    *,
    message: str = "",
    updated_input: dict | None = None,
) -> dict:
    """The hook output of a decision, in the shape the event's CLI documents:
    PermissionRequest → hookSpecificOutput.decision {behavior, message?, updatedInput?};
    PreToolUse → hookSpecificOutput {permissionDecision, permissionDecisionReason?,
    updatedInput?}."""
    if event == PRE_TOOL_USE:
        output: dict[str, Any] = {"hookEventName": PRE_TOOL_USE, "permissionDecision": behavior}
        if message:
            output["permissionDecisionReason"] = message
        if updated_input is not None:
            output["updatedInput"] = updated_input
        return {"hookSpecificOutput": output}
    chosen: dict[str, Any] = {"behavior": behavior}
    if behavior == DENY and message:
        chosen["message"] = message
    if behavior == ALLOW and updated_input is not None:
        chosen["updatedInput"] = updated_input
    return {"hookSpecificOutput": {"hookEventName": PERMISSION_REQUEST, "decision": chosen}}
