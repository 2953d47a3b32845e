"""The team's policy of docs/operators/tools.md ("A team's policy"), evaluated against a
recorded session of 50 mixed calls (Claude Code, Codex, Parley's agent with the notes server;
tests/questions/data/session_50_calls.json): how many asked, and which rule allowed or denied
the others. The block is read from the page itself, so the documented policy is the one run."""

import json
import re
from collections import Counter
from pathlib import Path

import pytest

from mcp_client.config import parse
from questions import rules

pytestmark = pytest.mark.django_db

ROOT = Path(__file__).resolve().parents[2]
DOC = ROOT / "docs" / "operators" / "tools.md"
SESSION = Path(__file__).with_name("data") / "session_50_calls.json"
READ_ONLY = {"list_notes", "read_note"}  # the notes server's read-only tools: allowed by default


def documented_policy() -> str:
    page = DOC.read_text()
    section = page[page.index("**A team's policy.**") :]
    return re.search(r"```json\n(.*?)```", section, re.S).group(1)


def run() -> list[tuple[dict, rules.Verdict]]:
    config = parse(documented_policy())
    assert not config.error and not config.invalid, (config.error, config.invalid)
    calls = json.loads(SESSION.read_text())
    with rules.configured.added(lambda: config.rules, key="test.policy"):
        return [
            (
                call,
                rules.evaluate(
                    user=None,
                    conversation=None,
                    agent=call["agent"],
                    server=call["server"],
                    tool=call["tool"],
                    arguments=call["arguments"],
                    default=rules.ALLOW if call["tool"] in READ_ONLY else rules.ASK,
                    spend=False,
                ),
            )
            for call in calls
        ]


def summary(decided) -> Counter:
    return Counter(
        (verdict.effect, verdict.rule.label if verdict.rule else "no rule")
        for _call, verdict in decided
    )


def test_the_documented_policy_on_a_recorded_session_of_fifty_calls():
    decided = run()
    assert len(decided) == 50
    assert not any(verdict.failed for _call, verdict in decided)
    assert summary(decided) == Counter(
        {
            ("allow", "npm test*"): 5,
            ("allow", "git status*"): 3,
            ("allow", "no rule"): 4,  # the notes server's reads
            ("allow", "pytest*"): 2,
            ("allow", "git diff*"): 2,
            ("allow", "draft-*"): 3,
            ("allow", "/work/shop/src/*"): 3,
            ("allow", "git log*"): 1,
            ("allow", "ls*"): 1,
            ("allow", "Read"): 1,
            ("deny", "*rm -rf*"): 3,
            ("deny", "git push --force*"): 1,
            ("deny", "sudo *"): 1,
            ("deny", "delete_*"): 2,
            ("deny", "*.env"): 1,
            ("ask", "npm publish*"): 1,
            ("ask", "no rule"): 16,
        }
    )


def test_no_chained_command_is_allowed_by_a_prefix_and_the_shadow_rule_only_counts():
    decided = run()
    for call, verdict in decided:
        command = call["arguments"].get("command", "")
        if rules.SHELL_CONTROL.search(command):
            assert verdict.effect != rules.ALLOW, command
    [(_call, docker)] = [
        (c, v) for c, v in decided if "docker" in c["arguments"].get("command", "")
    ]
    assert docker.effect == rules.ASK
    assert [rule.label for rule in docker.shadow] == ["docker *"]
    [(_call, publish)] = [
        (c, v) for c, v in decided if c["arguments"].get("command") == "npm publish"
    ]
    assert publish.rule.needed == 2
