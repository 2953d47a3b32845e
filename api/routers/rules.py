"""GET and POST /rules, PATCH and DELETE /rules/{id}: approval rules (questions.rules). A user
sees the deployment's rules and their own, and changes only their own (staff: the
deployment's too); a bad rule is refused with 422 naming its field."""

from ninja import Router, Status
from ninja.errors import ValidationError

from api.schemas import MEMBER_ERRORS, RuleOut
from questions import rules
from questions.rules import RuleChanges, RuleIn

router = Router()


@router.get("/rules", response={200: list[RuleOut], **MEMBER_ERRORS}, by_alias=True)
def list_rules(request):
    """The rules that count in your turns: MCP_CONFIG's (`id` null), the deployment's, and
    your own user and conversation rules, newest first."""
    configured = [rule_out(rule) for rule in rules.configured_rules()]
    return configured + [row_out(row) for row in rules.rules_for_user(user=request.user)]


@router.post("/rules", response={201: RuleOut, **MEMBER_ERRORS}, by_alias=True)
def create_rule(request, body: RuleIn):
    """Add a rule: yours (`user`), for one conversation you may act in (`conversation`), or
    the deployment's (staff only: 403 otherwise)."""
    return Status(201, row_out(_refusing(rules.create_rule, user=request.user, spec=body)))


@router.patch("/rules/{rule_id}", response={200: RuleOut, **MEMBER_ERRORS}, by_alias=True)
def update_rule(request, rule_id: int, body: RuleChanges):
    """Change the fields given (null clears `expiresAt`, `maxUses`, `agent`, `server`); scope
    and conversation stay. 404 for a rule that is not yours; 403 for a deployment rule
    unless you are staff."""
    return row_out(_refusing(rules.update_rule, user=request.user, rule_id=rule_id, changes=body))


@router.delete("/rules/{rule_id}", response={204: None, **MEMBER_ERRORS})
def delete_rule(request, rule_id: int):
    """Revoke a rule: the calls it decided fall to the other rules again."""
    rules.revoke_rule(user=request.user, rule_id=rule_id)
    return Status(204, None)


def _refusing(service, **arguments):
    """Call `service`; a rule it refuses is the API's validation error naming the field."""
    try:
        return service(**arguments)
    except rules.InvalidRule as error:
        raise ValidationError(
            [
                {
                    "loc": ["body", "body", error.field],
                    "msg": str(error.message),
                    "type": "value_error",
                }
            ]
        ) from None


def row_out(row) -> dict:
    return {
        **rule_out(rules.Rule.of(row)),
        "id": row.pk,
        "createdAt": row.created_at,
        "createdBy": row.created_by.get_username() if row.created_by_id else None,
    }


def rule_out(rule: rules.Rule) -> dict:
    return {
        "id": None,
        "scope": rule.scope,
        "conversationId": rule.conversation_id,
        "agent": rule.agent or None,
        "server": rule.server or None,
        "tool": rule.tool,
        "match": rule.match,
        "effect": rule.effect,
        "expiresAt": rule.expires_at,
        "maxUses": rule.max_uses,
        "uses": rule.uses,
        "shadow": rule.shadow,
        "quorum": "all" if rule.quorum == 0 else rule.quorum,
        "approvers": list(rule.approvers),
    }
