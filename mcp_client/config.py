"""The operator's MCP servers: the JSON file named by MCP_CONFIG, in the `mcpServers` format
that Claude Desktop, Cursor and VS Code use, plus Parley's optional per-server `approval`:

    {"mcpServers": {
        "notes": {"command": "python", "args": ["server.py"], "env": {...}, "cwd": "...",
                  "approval": {"default": "ask", "tools": {"list_notes": "allow"},
                               "rules": [{"tool": "write_note", "match": {"name": "draft-*"},
                                          "effect": "allow"}]}},
        "search": {"url": "https://example.org/mcp", "headers": {"Authorization": "..."}},
        "tracker": {"url": "https://tracker.example/mcp", "auth": "oauth",
                    "oauth": {"clientId": "...", "clientSecret": "${TRACKER_SECRET}"}}},
     "approval": {"rules": [{"agent": "claude-code", "tool": "Bash",
                             "match": {"command": "rm *"}, "effect": "deny"}]}}

`approval.rules` are the deployment's approval rules (questions.rules): a server's apply to
its tools, the file's own `approval.rules` to any agent's calls (the CLIs' too). Each is a
rule as the API takes it (`agent`, `server`, `tool`, `match`, `effect`, `expiresAt`,
`shadow`), without `scope` (always the deployment's), `conversationId` or `maxUses`.

A server with `"auth": "oauth"` is used with each user's own account: they connect it once
on /settings/tools/ (mcp_client.signin), and its tools run with their token only.

Strings may name environment variables as `${NAME}` or `${NAME:-default}`, as Claude Code's
`.mcp.json` does (a secret stays out of the file). Only this file starts processes: nothing a
user sends can name a command. A file that cannot
be read is one clear error (healthz, /settings/tools/, the log); a server whose entry is wrong
is left out with its own error, and the others still run.
"""

import json
import logging
import os
import re
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import Annotated, Literal

from django.conf import settings
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from questions.rules import DEPLOYMENT, Rule, RuleIn

logger = logging.getLogger("parley.mcp_client")

Policy = Literal["ask", "allow", "deny"]
ASK, ALLOW, DENY = "ask", "allow", "deny"
# A server's name is part of each tool's name (mcp__<server>__<tool>), which the model
# providers limit to letters, digits, _ and -.
SERVER_NAME = re.compile(r"[A-Za-z0-9_-]{1,40}")
# The legacy protocol (initialize handshake) or the SDK's negotiation of the newest it speaks.
Protocol = Literal["auto", "legacy"]


class ConfiguredRule(RuleIn):
    """A deployment rule in MCP_CONFIG."""

    scope: Literal["deployment"] = DEPLOYMENT

    @field_validator("max_uses", "conversation_id")
    @classmethod
    def _not_in_a_file(cls, value):
        if value is not None:
            raise ValueError("not in MCP_CONFIG: only a rule kept by Parley has it")
        return value


class Rules(BaseModel):
    model_config = ConfigDict(extra="forbid")

    rules: list[ConfiguredRule] = []


class Approval(Rules):
    default: Policy | None = None
    tools: dict[str, Policy] = {}


class _Server(BaseModel):
    model_config = ConfigDict(extra="forbid")

    approval: Approval = Approval()
    protocol: Protocol = "auto"
    # Seconds one tool call may take before the model is told it timed out.
    timeout: Annotated[float, Field(gt=0, le=3600)] = 300


class StdioServer(_Server):
    command: Annotated[str, Field(min_length=1)]
    args: list[str] = []
    env: dict[str, str] = {}
    cwd: str | None = None


class OAuthClient(BaseModel):
    """How Parley identifies itself to a server's authorization server: a client the operator
    registered there (`clientId`, and `clientSecret` for a confidential one), or a Client ID
    Metadata Document Parley's operator hosts (`clientMetadataUrl`); by default Parley registers
    itself dynamically (RFC 7591). `scope` replaces the scopes the server asks for."""

    model_config = ConfigDict(extra="forbid")

    clientId: Annotated[str, Field(min_length=1, max_length=500)] | None = None
    clientSecret: Annotated[str, Field(min_length=1, max_length=500)] | None = None
    clientMetadataUrl: Annotated[str, Field(pattern=r"^https://[^/]+/.")] | None = None
    scope: Annotated[str, Field(max_length=1000)] | None = None

    @model_validator(mode="after")
    def _secret_needs_id(self):
        if self.clientSecret and not self.clientId:
            raise ValueError("clientSecret needs the clientId it belongs to")
        return self


class HttpServer(_Server):
    url: Annotated[str, Field(pattern=r"^https?://")]
    headers: dict[str, str] = {}
    type: Literal["http", "streamable-http", "streamableHttp"] | None = None
    # "oauth": each user signs in to the server with their own account (mcp_client.signin).
    auth: Literal["oauth"] | None = None
    oauth: OAuthClient = OAuthClient()

    @model_validator(mode="after")
    def _oauth_alone(self):
        if self.auth != "oauth" and self.oauth != OAuthClient():
            raise ValueError('oauth: only for a server with "auth": "oauth"')
        if self.auth == "oauth" and any(h.lower() == "authorization" for h in self.headers):
            raise ValueError("headers: each user's own token is the Authorization of this server")
        return self


class _File(BaseModel):
    model_config = ConfigDict(extra="ignore")

    mcpServers: dict[str, object] = {}
    approval: object = None

    @model_validator(mode="before")
    @classmethod
    def _object(cls, data):
        if not isinstance(data, dict):
            raise ValueError("the file must hold a JSON object")
        return data


@dataclass(frozen=True)
class ServerConfig:
    name: str
    spec: StdioServer | HttpServer

    @property
    def transport(self) -> str:
        return "stdio" if isinstance(self.spec, StdioServer) else "http"

    @property
    def per_user(self) -> bool:
        """Each user signs in to this server with their own account (`"auth": "oauth"`)."""
        return isinstance(self.spec, HttpServer) and self.spec.auth == "oauth"

    def policy(self, tool: str) -> Policy | None:
        """The operator's policy for one of this server's tools, or None (the default: a
        read-only tool runs at once, any other asks)."""
        return self.spec.approval.tools.get(tool, self.spec.approval.default)

    @property
    def rules(self) -> tuple[Rule, ...]:
        """The server's approval rules, each for its tools only."""
        return tuple(
            as_rule(rule, f"config:{self.name}:{number}", server=self.name)
            for number, rule in enumerate(self.spec.approval.rules, start=1)
        )


def as_rule(rule: ConfiguredRule, id: str, *, server: str = "") -> Rule:
    return Rule(
        id=id,
        scope=DEPLOYMENT,
        agent=rule.agent or "",
        server=server or rule.server,
        tool=rule.tool,
        match=dict(rule.match),
        effect=rule.effect,
        expires_at=rule.expires_at,
        shadow=rule.shadow,
        quorum=0 if rule.quorum == "all" else rule.quorum,
        approvers=tuple(rule.approvers),
    )


@dataclass(frozen=True)
class Config:
    servers: tuple[ServerConfig, ...] = ()
    # The file as a whole could not be used (it names no server then).
    error: str = ""
    # Entries left out, by server name (or `approval`, the file's own rules): why.
    invalid: dict[str, str] = field(default_factory=dict)
    # The file's own `approval.rules`, for every agent.
    own_rules: tuple[Rule, ...] = ()

    @property
    def rules(self) -> tuple[Rule, ...]:
        """The deployment's rules in the file: its own, then each server's."""
        return self.own_rules + tuple(rule for server in self.servers for rule in server.rules)


VARIABLE = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)(?::-([^}]*))?\}")


def _expand(value):
    """`${NAME}` and `${NAME:-default}` in every string of an entry, from the environment."""
    if isinstance(value, str):
        return VARIABLE.sub(lambda m: os.environ.get(m[1]) or (m[2] or ""), value)
    if isinstance(value, list):
        return [_expand(v) for v in value]
    if isinstance(value, dict):
        return {k: (v if k == "approval" else _expand(v)) for k, v in value.items()}
    return value


def parse(text: str) -> Config:
    try:
        document = _File.model_validate(json.loads(text))
    except ValueError as error:  # json and pydantic errors alike
        return Config(error=f"MCP_CONFIG is not a valid mcpServers file: {_short(error)}")
    servers, invalid = [], {}
    for name, entry in document.mcpServers.items():
        if not SERVER_NAME.fullmatch(name) or "__" in name:
            invalid[name[:40]] = "the name may hold only letters, digits, _ and - (no __)"
            continue
        if not isinstance(entry, dict):
            invalid[name] = "the entry must be a JSON object"
            continue
        model = StdioServer if "command" in entry else HttpServer
        try:
            servers.append(ServerConfig(name, model.model_validate(_expand(entry))))
        except ValidationError as error:
            invalid[name] = _short(error)
    own_rules = ()
    if document.approval is not None:
        try:
            listed = Rules.model_validate(document.approval).rules
        except ValidationError as error:
            invalid["approval"] = _short(error)
        else:
            own_rules = tuple(
                as_rule(rule, f"config:{number}") for number, rule in enumerate(listed, start=1)
            )
    return Config(servers=tuple(servers), invalid=invalid, own_rules=own_rules)


def _short(error: Exception) -> str:
    if isinstance(error, ValidationError):
        return "; ".join(
            f"{'.'.join(str(p) for p in e['loc'])}: {e['msg']}" if e["loc"] else e["msg"]
            for e in error.errors()
        )
    return str(error)


@cache
def load() -> Config:
    """MCP_CONFIG, read once per process (a change needs a restart, as for every setting)."""
    path = settings.MCP_CONFIG
    if not path:
        return Config()
    try:
        text = Path(path).read_text(encoding="utf-8")
    except OSError as error:
        config = Config(error=f"MCP_CONFIG {path} cannot be read: {error.strerror}")
    else:
        config = parse(text)
    if config.error:
        logger.error("%s", config.error)
    for name, why in config.invalid.items():
        logger.error("MCP server %s left out: %s", name, why)
    return config
