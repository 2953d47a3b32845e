"""The real, pinned Claude Code CLI (tools/agents, `make agents`) asks Parley before it acts:
`claude -p` against a fake Anthropic Messages API served by the test, its hooks configured
exactly as Settings' "Connect an agent" gives them (mcp_server.connecting.claude_code_hooks),
a live Parley server, and the person deciding through the JSON API.

In print mode there is no terminal: a call Parley does not decide is denied by the CLI itself,
so nothing runs unless the person allowed it. AskUserQuestion exists only in an interactive
session: that test drives the CLI in a pseudo-terminal."""

import fcntl
import json
import os
import pty
import secrets
import signal
import struct
import subprocess
import termios
import threading
import time
from pathlib import Path

import httpx
import pytest

from mcp_server.connecting import TOKEN_VARIABLE, codex_hooks
from tests.fake_llm import FakeLLM, FakeResponses
from tests.live_server import LiveServer
from tests.mcp.conftest import AGENTS, CLAUDE, ROOT, Claude, add_account

pytestmark = [pytest.mark.live]

# Short, so the test of no decision is quick; long enough for the test to decide first.
HOOK_WAIT = 8


@pytest.fixture(scope="module")
def mcp_live(tmp_path_factory):
    """One Parley server for the module (the `account` fixture's), hooks waiting HOOK_WAIT."""
    subprocess.run(["make", "-s", "agents"], cwd=ROOT, check=True)
    server = LiveServer(
        tmp_path_factory.mktemp("hooks"),
        AGENT_HOOK_WAIT=str(HOOK_WAIT),
        MCP_PROGRESS_SECONDS="0.2",
        PARLEY_SWEEP_SECONDS="0.2",
    )
    server.set_up_database()
    server.start()
    yield server
    server.stop()


@pytest.fixture
def model():
    fake = FakeLLM()
    yield fake
    fake.close()


@pytest.fixture
def claude(mcp_live, account, model, tmp_path):
    cli = Claude(mcp_live, account.token, model, tmp_path)
    yield cli
    if cli.process is not None and cli.process.poll() is None:
        cli.process.kill()
        cli.process.wait()


def bash(command: str, description: str = "Run it", call_id: str = "toolu_01") -> dict:
    arguments = json.dumps({"command": command, "description": description})
    return {"tool_calls": [{"id": call_id, "name": "Bash", "arguments": arguments}]}


def pending_approval(server: LiveServer, account, timeout: float = 30) -> dict:
    """The account's one pending approval, once the CLI's hook has asked it."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        response = httpx.get(f"{server.url}/api/v1/questions", headers=account.auth)
        response.raise_for_status()
        approvals = [q for q in response.json() if q["tool"] == "tool_approval"]
        if approvals:
            return approvals[0]
        time.sleep(0.05)
    raise AssertionError("no approval came")


def decide(server: LiveServer, account, approval: dict, **body) -> None:
    url = (
        f"{server.url}/api/v1/conversations/{approval['conversationId']}"
        f"/approvals/{approval['toolCallId']}"
    )
    response = httpx.post(url, headers=account.auth, json=body)
    assert response.status_code == 200, response.text


def tool_result(model: FakeLLM) -> dict:
    """What the model received for its call, in its next request."""
    [result] = [
        block
        for block in model.requests[-1]["body"]["messages"][-1]["content"]
        if isinstance(block, dict) and block.get("type") == "tool_result"
    ]
    return result


def ended(server: LiveServer, approval: dict) -> tuple[str, dict]:
    [(status, answers)] = server.query(
        "SELECT status, answers FROM questions_question WHERE conversation_id = %s "
        "AND tool_call_id = %s",
        approval["conversationId"],
        approval["toolCallId"],
    )
    return status, json.loads(answers) if isinstance(answers, str) else answers


def test_allow_runs_the_command_once_and_shows_who_allowed_it(mcp_live, account, model, claude):
    ran = claude.project / "ran"
    model.queue(bash(f"echo once >> {ran}", "Note that it ran"), {"text": "done"})
    claude.start()
    approval = pending_approval(mcp_live, account)
    assert (approval["approval"]["agent"], approval["approval"]["server"]) == ("claude-code", "")
    assert approval["approval"]["arguments"]["command"] == f"echo once >> {ran}"
    decide(mcp_live, account, approval, decision="allow")
    claude.finish()
    assert ran.read_text() == "once\n"
    assert tool_result(model)["is_error"] is False
    response = httpx.get(
        f"{mcp_live.url}/api/v1/questions", params={"status": "answered"}, headers=account.auth
    )
    [decided] = response.json()
    assert (decided["answeredBy"], decided["answeredVia"]) == (account.username, "api")


def test_deny_with_feedback_runs_nothing_and_the_model_reads_the_feedback(
    mcp_live, account, model, claude
):
    ran = claude.project / "ran"
    model.queue(bash(f"touch {ran}"), {"text": "done"})
    claude.start()
    approval = pending_approval(mcp_live, account)
    decide(mcp_live, account, approval, decision="deny", feedback="Use mkdir instead")
    claude.finish()
    assert not ran.exists()
    result = tool_result(model)
    assert result["is_error"] is True
    assert "Use mkdir instead" in json.dumps(result["content"])


def test_an_edit_runs_the_edited_command_not_the_original(mcp_live, account, model, claude):
    original, edited = claude.project / "original", claude.project / "edited"
    model.queue(bash(f"touch {original}"), {"text": "done"})
    claude.start()
    approval = pending_approval(mcp_live, account)
    arguments = {"command": f"touch {edited}", "description": "Run it"}
    decide(mcp_live, account, approval, decision="allow", arguments=arguments)
    claude.finish()
    assert edited.exists()
    assert not original.exists()


def approval_for(server: LiveServer, account, command: str, timeout: float = 30) -> dict:
    """The account's pending approval of `command`, once the CLI's hook has asked it."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        response = httpx.get(f"{server.url}/api/v1/questions", headers=account.auth)
        response.raise_for_status()
        for question in response.json():
            if (question.get("approval") or {}).get("arguments", {}).get("command") == command:
                return question
        time.sleep(0.05)
    raise AssertionError(f"no approval of {command!r} came")


def test_dont_ask_again_answers_the_same_prefix_at_once_until_the_rule_is_revoked(
    mcp_live, account, model, claude
):
    first, second, third, fourth = (claude.project / name for name in ("a", "b", "c", "d"))
    model.queue(
        bash(f"touch {first}", call_id="toolu_01"),
        bash(f"touch {second}", call_id="toolu_02"),  # the same prefix: the rule answers
        bash(f"mkdir {third}", call_id="toolu_03"),  # another prefix: asks
        bash(f"touch {fourth}", call_id="toolu_04"),  # asks again: the rule was revoked
        {"text": "done"},
    )
    claude.start()
    decide(mcp_live, account, approval_for(mcp_live, account, f"touch {first}"), decision="always")
    other = approval_for(mcp_live, account, f"mkdir {third}")
    assert second.exists()  # ran without asking, before the next call came
    [rule] = httpx.get(f"{mcp_live.url}/api/v1/rules", headers=account.auth).json()
    assert (rule["agent"], rule["tool"], rule["match"]) == (
        "claude-code",
        "Bash",
        {"command": "touch*"},
    )
    revoked = httpx.delete(f"{mcp_live.url}/api/v1/rules/{rule['id']}", headers=account.auth)
    assert revoked.status_code == 204, revoked.text
    decide(mcp_live, account, other, decision="deny")
    decide(mcp_live, account, approval_for(mcp_live, account, f"touch {fourth}"), decision="allow")
    claude.finish()
    assert (first.exists(), second.exists(), third.exists(), fourth.exists()) == (
        True,
        True,
        False,
        True,
    )
    # The rule's answer is audited in the session's conversation, like a person's.
    audited = httpx.get(
        f"{mcp_live.url}/api/v1/questions", params={"status": "answered"}, headers=account.auth
    ).json()
    assert "rule" in {q["answeredVia"] for q in audited}


def test_no_decision_in_time_runs_nothing_and_says_it_was_asked_in_the_terminal(
    mcp_live, account, model, claude
):
    ran = claude.project / "ran"
    model.queue(bash(f"touch {ran}"), {"text": "done"})
    claude.start()
    approval = pending_approval(mcp_live, account)
    claude.finish(timeout=HOOK_WAIT + 60)
    assert not ran.exists()
    assert tool_result(model)["is_error"] is True
    assert ended(mcp_live, approval) == ("cancelled", {"ended": "terminal"})


def test_the_cli_killed_mid_wait_ends_the_approval(mcp_live, account, model, claude):
    model.queue(bash(f"touch {claude.project / 'ran'}"), {"text": "done"})
    process = claude.start()
    approval = pending_approval(mcp_live, account)
    process.kill()
    process.wait()
    deadline = time.monotonic() + HOOK_WAIT - 2  # well before the wait would have ended it
    while ended(mcp_live, approval)[0] == "pending":
        assert time.monotonic() < deadline, "the approval still waits"
        time.sleep(0.05)
    assert ended(mcp_live, approval) == ("cancelled", {"ended": "closed"})


def test_a_teammate_the_session_is_shared_with_allows_from_their_own_inbox(
    mcp_live, account, model, claude
):
    teammate = add_account(mcp_live, f"bo-{secrets.token_hex(3)}")
    ran = claude.project / "ran"
    model.queue(bash(f"touch {ran}"), {"text": "done"})
    claude.start()
    approval = pending_approval(mcp_live, account)
    shared = httpx.put(
        f"{mcp_live.url}/api/v1/conversations/{approval['conversationId']}"
        f"/members/{teammate.username}",
        headers=account.auth,
        json={"role": "participant"},
    )
    assert shared.status_code == 200, shared.text
    in_their_inbox = pending_approval(mcp_live, teammate)
    assert in_their_inbox["toolCallId"] == approval["toolCallId"]
    decide(mcp_live, teammate, in_their_inbox, decision="allow")
    claude.finish()
    assert ran.exists()
    [decided] = httpx.get(
        f"{mcp_live.url}/api/v1/questions", params={"status": "answered"}, headers=account.auth
    ).json()
    assert decided["answeredBy"] == teammate.username


# --- AskUserQuestion: interactive only ------------------------------------------------------------

COLOUR = {
    "questions": [
        {
            "question": "Which colour?",
            "header": "Colour",
            "options": [
                {"label": "Red", "description": "warm"},
                {"label": "Blue", "description": "cold"},
            ],
            "multiSelect": False,
        }
    ]
}


class AskingModel(FakeLLM):
    """Calls AskUserQuestion once, in the first request that offers it; then says "done".
    An interactive session also makes requests of its own (a title, a summary), which get
    "done" whatever their order."""

    def __init__(self) -> None:
        super().__init__()
        self.asked = False
        self.answered = threading.Event()

    def respond(self, body: dict) -> dict:
        offered = [tool.get("name") for tool in body.get("tools", [])]
        content = (body.get("messages") or [{}])[-1].get("content")
        results = (
            [c for c in content if c.get("type") == "tool_result"]
            if isinstance(content, list)
            else []
        )
        if results:
            self.answered.set()
        if "AskUserQuestion" in offered and not results and not self.asked:
            self.asked = True
            arguments = json.dumps(COLOUR)
            return {
                "tool_calls": [
                    {"id": "toolu_01", "name": "AskUserQuestion", "arguments": arguments}
                ]
            }
        return {"text": "done"}


def test_ask_user_question_answered_in_parley_reaches_the_model(
    mcp_live, account, claude, tmp_path
):
    model = AskingModel()
    try:
        claude.env["ANTHROPIC_BASE_URL"] = model.url
        claude.env["TERM"] = "xterm-256color"
        home = Path(claude.env["HOME"])
        # An interactive session that has been through onboarding and trusts its folder.
        state = {
            "hasCompletedOnboarding": True,
            "theme": "dark",
            "projects": {str(claude.project): {"hasTrustDialogAccepted": True}},
            # The key's last 20 characters: "use this API key?" answered yes.
            "customApiKeyResponses": {"approved": [claude.env["ANTHROPIC_API_KEY"][-20:]]},
        }
        for path in (home / ".claude.json", Path(claude.env["CLAUDE_CONFIG_DIR"]) / ".claude.json"):
            path.write_text(json.dumps(state))
        controller, terminal = pty.openpty()
        process = subprocess.Popen(
            [
                str(CLAUDE),
                "--model",
                "claude-sonnet-4-5",
                "--permission-mode",
                "default",
                "Ask me my colour.",
            ],
            cwd=claude.project,
            env=claude.env,
            stdin=terminal,
            stdout=terminal,
            stderr=terminal,
            start_new_session=True,
        )
        os.close(terminal)
        shown = bytearray()
        reader = threading.Thread(target=_drain, args=(controller, shown), daemon=True)
        reader.start()
        try:
            question = pending_question(mcp_live, account, shown)
            assert question["questions"][0]["question"] == "Which colour?"
            response = httpx.post(
                f"{mcp_live.url}/api/v1/conversations/{question['conversationId']}/respond",
                headers=account.auth,
                json={"answers": {"Which colour?": "Blue"}},
            )
            assert response.status_code == 200, response.text
            assert model.answered.wait(30), "the model never got the answer"
        finally:
            process.kill()
            process.wait()
            os.close(controller)
        [result] = [
            block
            for request in model.requests
            for block in (request["body"]["messages"][-1]["content"] or [])
            if isinstance(block, dict) and block.get("type") == "tool_result"
        ]
        assert '"Which colour?"="Blue"' in json.dumps(
            result["content"], ensure_ascii=False
        ).replace('\\"', '"')
    finally:
        model.close()


def _drain(fd: int, shown: bytearray) -> None:
    """Read the terminal's output, which the CLI blocks on if nobody reads it."""
    try:
        while chunk := os.read(fd, 65536):
            shown.extend(chunk)
    except OSError:
        pass


def pending_question(server: LiveServer, account, shown: bytearray, timeout: float = 30) -> dict:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        response = httpx.get(f"{server.url}/api/v1/questions", headers=account.auth)
        questions = [q for q in response.json() if q["tool"] == "ask_user_question"]
        if questions:
            return questions[0]
        time.sleep(0.05)
    raise AssertionError(f"no question came; the terminal showed: {bytes(shown[-3000:])!r}")


# --- Codex: interactive, through a pseudo-terminal ------------------------------------------------

CODEX = AGENTS / "codex"


class Codex:
    """The interactive Codex CLI (`-a on-request -s read-only`: `codex exec` never asks, so
    its hook never fires) in a pseudo-terminal, its config.toml holding the Settings page's
    command hook, against a fake Responses API that asks to run `command` escalated."""

    def __init__(self, server: LiveServer, token: str, tmp_path: Path, command: str) -> None:
        self.project = tmp_path / "proj"
        self.project.mkdir(exist_ok=True)
        home = tmp_path / "codex-home"
        config = home / ".codex"
        config.mkdir(parents=True)
        self.model = FakeResponses(
            "exec_command",
            {
                "cmd": command.format(project=self.project),
                "sandbox_permissions": "require_escalated",
                "justification": "Make a file",
            },
        )
        (config / "config.toml").write_text(
            'model = "gpt-5"\n'
            'model_provider = "fake"\n'
            "[model_providers.fake]\n"
            'name = "fake"\n'
            f'base_url = "{self.model.url}/v1"\n'
            'wire_api = "responses"\n'
            'env_key = "FAKE_OPENAI_KEY"\n'
            f'[projects."{self.project}"]\n'
            'trust_level = "trusted"\n\n' + codex_hooks(server.url)
        )
        self.env = {
            "PATH": os.environ["PATH"],
            "HOME": str(home),
            "CODEX_HOME": str(config),
            "FAKE_OPENAI_KEY": "fake",
            "TERM": "xterm-256color",
            TOKEN_VARIABLE: token,
        }
        self.shown = bytearray()

    def start(self) -> subprocess.Popen:
        controller, terminal = pty.openpty()
        fcntl.ioctl(terminal, termios.TIOCSWINSZ, struct.pack("HHHH", 40, 120, 0, 0))
        self.process = subprocess.Popen(
            [
                str(CODEX),
                "-a",
                "on-request",
                "-s",
                "read-only",
                "--dangerously-bypass-hook-trust",
                "Make the file.",
            ],
            cwd=self.project,
            env=self.env,
            stdin=terminal,
            stdout=terminal,
            stderr=terminal,
            start_new_session=True,
        )
        os.close(terminal)
        self.controller = controller
        threading.Thread(target=self._terminal, daemon=True).start()
        return self.process

    def _terminal(self) -> None:
        """Read the screen; answer the terminal's cursor-position query, as a terminal does."""
        try:
            while chunk := os.read(self.controller, 65536):
                self.shown.extend(chunk)
                if b"\x1b[6n" in chunk:
                    os.write(self.controller, b"\x1b[1;1R")
        except OSError:
            pass

    def stop(self) -> None:
        # `codex` is a launcher whose native child outlives it: end its whole session.
        os.killpg(self.process.pid, signal.SIGKILL)
        self.process.wait()
        os.close(self.controller)
        self.model.close()


@pytest.fixture
def codex(mcp_live, account, tmp_path):
    made = []

    def make(command: str) -> Codex:
        cli = Codex(mcp_live, account.token, tmp_path, command)
        made.append(cli)
        return cli

    yield make
    for cli in made:
        cli.stop()


def test_codex_allow_runs_the_command(mcp_live, account, codex):
    cli = codex("touch {project}/ran")
    cli.start()
    approval = pending_approval(mcp_live, account)
    assert (approval["approval"]["agent"], approval["approval"]["server"]) == ("codex", "")
    assert approval["approval"]["arguments"]["command"] == f"touch {cli.project}/ran"
    decide(mcp_live, account, approval, decision="allow")
    assert cli.model.result_came.wait(30), bytes(cli.shown[-2000:])
    assert (cli.project / "ran").exists()


def test_codex_deny_with_feedback_runs_nothing_and_the_model_reads_it(mcp_live, account, codex):
    cli = codex("touch {project}/ran")
    cli.start()
    approval = pending_approval(mcp_live, account)
    decide(mcp_live, account, approval, decision="deny", feedback="Use mkdir instead")
    assert cli.model.result_came.wait(30), bytes(cli.shown[-2000:])
    assert not (cli.project / "ran").exists()
    [output] = cli.model.outputs()
    assert "Use mkdir instead" in output["output"]


def test_codex_with_no_decision_in_time_asks_in_its_terminal_and_runs_nothing(
    mcp_live, account, codex
):
    cli = codex("touch {project}/ran")
    cli.start()
    approval = pending_approval(mcp_live, account)
    deadline = time.monotonic() + HOOK_WAIT + 30
    while ended(mcp_live, approval)[0] == "pending":
        assert time.monotonic() < deadline, "the approval still waits"
        time.sleep(0.1)
    assert ended(mcp_live, approval) == ("cancelled", {"ended": "terminal"})
    deadline = time.monotonic() + 30
    while b"Would you like to run" not in cli.shown:
        assert time.monotonic() < deadline, bytes(cli.shown[-3000:])
        time.sleep(0.1)
    assert not (cli.project / "ran").exists()


def test_codex_killed_mid_wait_ends_the_approval(mcp_live, account, codex):
    cli = codex("touch {project}/ran")
    cli.start()
    approval = pending_approval(mcp_live, account)
    os.killpg(cli.process.pid, signal.SIGKILL)
    deadline = time.monotonic() + HOOK_WAIT - 2  # well before the wait would have ended it
    while ended(mcp_live, approval)[0] == "pending":
        assert time.monotonic() < deadline, "the approval still waits"
        time.sleep(0.05)
    assert ended(mcp_live, approval) == ("cancelled", {"ended": "closed"})
    assert not (cli.project / "ran").exists()
