import pytest
from questions.models import Question
from tests.api.tool_requests import ask_approvals, ask_elicitation

pytestmark = [pytest.mark.django_db]
HIDDEN = "\u202e\u200b\U000e0041\x00\ud800"

def test_probe_args(api, conversation, dispatched):
    ask_approvals(conversation.pk)
    r = api.post(f"/conversations/{conversation.pk}/approvals/w1", {"decision": "allow", "arguments": {"name": "a" + HIDDEN, "text": "b"}})
    print(r.status_code, r.content[:300])

def test_probe_feedback(api, conversation, dispatched):
    ask_approvals(conversation.pk)
    r = api.post(f"/conversations/{conversation.pk}/approvals/w1", {"decision": "deny", "feedback": "a" + HIDDEN})
    print(r.status_code, r.content[:300], Question.objects.get().answers)

def test_probe_content(api, conversation, dispatched):
    ask_elicitation(conversation.pk)
    r = api.post(f"/conversations/{conversation.pk}/elicitations/elicit_x", {"action": "accept", "content": {"name": "a" + HIDDEN, "text": "b", "colour": "red"}})
    print(r.status_code, r.content[:300])

def test_probe_key(api, conversation, dispatched):
    ask_approvals(conversation.pk)
    r = api.post(f"/conversations/{conversation.pk}/approvals/w{HIDDEN}", {"decision": "allow"})
    print(r.status_code, r.content[:300])
