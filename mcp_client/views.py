"""/settings/tools/: the operator's MCP servers (connected, or why not), their tools with the
operator's policy for each, and the approval rules: the deployment's (read-only) and the
user's own, which they add, edit, revoke, switch to shadow mode and try on their last calls."""

import time
from functools import wraps

from asgiref.sync import async_to_sync
from django.conf import settings
from django.contrib import messages
from django.core.exceptions import PermissionDenied
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.utils.translation import gettext as _
from django.utils.translation import gettext_lazy
from django.views.decorators.http import require_GET, require_http_methods, require_POST
from pydantic import ValidationError

from chat.selectors import sidebar_conversations
from mcp_client import signin, status
from mcp_client.config import ALLOW, ASK, DENY, ServerConfig, load
from mcp_client.connections import list_tools_with
from mcp_client.models import SignIn
from mcp_client.tools import exposed_name
from questions import rules

# The fields of the rule form, by their API names (questions.rules.RuleIn).
FIELDS = (
    "scope",
    "conversationId",
    "agent",
    "server",
    "tool",
    "match",
    "effect",
    "expiresAt",
    "maxUses",
    "shadow",
    "quorum",
    "approvers",
)
CONVERSATIONS_OFFERED = 50
# What the form says of a field it cannot use (the API's own words are its validation error's).
FIELD_ERRORS = {
    "scope": gettext_lazy("Choose where the rule counts."),
    "conversationId": gettext_lazy(
        "Choose a conversation you take part in, for a rule in one conversation only."
    ),
    "agent": gettext_lazy("Choose an agent from the list."),
    "server": gettext_lazy("A server’s name has only letters, digits, _ and -."),
    "tool": gettext_lazy("Give the tool’s own name, or a glob on it."),
    "match": gettext_lazy(
        "Write one “name = glob” per line, each with a name and a glob, without hidden characters."
    ),
    "effect": gettext_lazy("Choose Allow, Ask or Deny."),
    "expiresAt": gettext_lazy(
        "Give a time in the future with its offset, such as 2026-12-31T18:00:00Z."
    ),
    "maxUses": gettext_lazy("Give a whole number from 1."),
    "shadow": gettext_lazy("Shadow mode is on or off."),
    "quorum": gettext_lazy(
        "Give how many people must allow (2 to 10, or “all” of the approvers), for an Ask rule "
        "only, and no more than the approvers listed."
    ),
    "approvers": gettext_lazy("List user names separated by commas."),
}
RULE_REFUSED = gettext_lazy("This rule cannot be kept.")


def rule_view(view):
    """Map RuleNotFound (absent, or someone else's) to a 404, RuleReadOnly to a 403."""

    @wraps(view)
    def wrapped(request, *args, **kwargs):
        try:
            return view(request, *args, **kwargs)
        except rules.RuleNotFound:
            raise Http404 from None
        except rules.RuleReadOnly:
            raise PermissionDenied from None

    return wrapped


@require_GET
def tools_page(request: HttpRequest) -> HttpResponse:
    return _tools_page(request)


def _tools_page(request: HttpRequest, *, form=None, errors=None, status_code=200) -> HttpResponse:
    servers = status.servers()
    signed_in = {s.server: s for s in SignIn.objects.filter(user=request.user)}
    for server in servers:
        if server["config"].per_user:
            server["sign_in"] = signed_in.get(server["name"])
            if server["sign_in"] and server["sign_in"].problem:
                server["problem"] = signin.problem_text(server["sign_in"].problem)
            listed = server["sign_in"].tools if server["sign_in"] else None
            server["tools"] = status.rows(listed or signin.newest_tools(server["name"]))
        for tool in server["tools"]:
            tool["exposed"] = exposed_name(server["name"], tool["name"])
            tool["policy"] = server["config"].policy(tool["name"]) or (
                ALLOW if tool["readOnly"] else ASK
            )
    config = load()
    kept = rules.rules_for_user(user=request.user)
    context = {
        "servers": servers,
        "config_error": config.error,
        "invalid": config.invalid,
        "policies": {"allow": ALLOW, "ask": ASK, "deny": DENY},
        "own_rules": [r for r in kept if r.scope != rules.DEPLOYMENT],
        "deployment_rules": [r for r in kept if r.scope == rules.DEPLOYMENT],
        "configured_rules": rules.configured_rules(),
        "form": form or {"scope": rules.USER, "effect": rules.ALLOW},
        "errors": errors or {},
        "conversations": _conversations(request),
    }
    return render(request, "mcp_client/tools.html", context, status=status_code)


@require_POST
@rule_view
def add_rule(request: HttpRequest) -> HttpResponse:
    form = _form(request)
    try:
        rule = rules.create_rule(user=request.user, spec=rules.RuleIn.model_validate(_data(form)))
    except ValidationError as error:
        return _tools_page(request, form=form, errors=_errors(error), status_code=422)
    except rules.InvalidRule as error:
        return _tools_page(
            request, form=form, errors={error.field: str(error.message)}, status_code=422
        )
    messages.success(request, _("Rule added: %(rule)s") % {"rule": rules.Rule.of(rule).label})
    return redirect("mcp_client:tools")


@require_http_methods(["GET", "POST"])
@rule_view
def rule_page(request: HttpRequest, rule_id: int) -> HttpResponse:
    """A rule: its form (the user's own, or staff's for a deployment rule), and with
    `?dry_run=1` what it would have done to the user's last calls."""
    rule = rules.rule_for_user(user=request.user, rule_id=rule_id)
    editable = rule.scope != rules.DEPLOYMENT or request.user.is_staff
    errors = {}
    form = _as_form(rule)
    if request.method == "POST":
        if not editable:
            raise rules.RuleReadOnly
        form = {**_form(request), "scope": rule.scope, "conversationId": rule.conversation_id}
        data = _data(form)
        for fixed in ("scope", "conversationId"):
            data.pop(fixed, None)
        try:
            rules.update_rule(
                user=request.user,
                rule_id=rule.pk,
                changes=rules.RuleChanges.model_validate(data),
            )
        except ValidationError as error:
            errors = _errors(error)
        except rules.InvalidRule as error:
            errors = {error.field: str(error.message)}
        else:
            messages.success(request, _("Rule saved."))
            return redirect("mcp_client:tools")
    context = {
        "rule": rule,
        "label": rules.Rule.of(rule).label,
        "editable": editable,
        "form": form,
        "errors": errors,
        "conversations": _conversations(request),
        "calls": rules.dry_run(user=request.user, rule=rule)
        if request.GET.get("dry_run")
        else None,
        "dry_run_calls": rules.DRY_RUN_CALLS,
    }
    return render(request, "mcp_client/rule.html", context, status=422 if errors else 200)


@require_POST
@rule_view
def revoke_rule(request: HttpRequest, rule_id: int) -> HttpResponse:
    rules.revoke_rule(user=request.user, rule_id=rule_id)
    messages.success(request, _("Rule revoked."))
    return redirect("mcp_client:tools")


@require_POST
@rule_view
def shadow_rule(request: HttpRequest, rule_id: int) -> HttpResponse:
    on = request.POST.get("shadow") == "on"
    rules.update_rule(user=request.user, rule_id=rule_id, changes=rules.RuleChanges(shadow=on))
    messages.success(
        request, _("Shadow mode on: the rule decides nothing.") if on else _("Shadow mode off.")
    )
    return redirect("mcp_client:tools")


# --- Signing in to a server that asks each user to -------------------------------------------

# The sign-ins a person has started and not finished, in their session, by `state`.
PENDING = "mcp_client.sign_ins"
STALE = gettext_lazy(
    "This sign-in is not one you started here, or it was used already. Connect again."
)
UNLISTED = gettext_lazy(
    "%(server)s gave a token but did not list its tools with it. Connect again later."
)


def _per_user_server(name: str) -> ServerConfig:
    server = next((s for s in load().servers if s.name == name), None)
    if server is None or not server.per_user:
        raise Http404
    return server


@require_POST
def connect(request: HttpRequest, server: str) -> HttpResponse:
    """Start signing in to `server`: to its authorization server's consent page."""
    config = _per_user_server(server)
    callback = (settings.PUBLIC_URL if settings.PUBLIC_URL_CONFIGURED else "") + reverse(
        "mcp_client:signed_in"
    )
    try:
        url, pending = async_to_sync(signin.begin)(config, request.build_absolute_uri(callback))
    except signin.SignInFailed as error:
        messages.error(request, str(error))
        return redirect("mcp_client:tools")
    now = time.time()
    kept = {k: v for k, v in request.session.get(PENDING, {}).items() if v["until"] > now}
    kept[pending["state"]] = pending
    request.session[PENDING] = kept
    return redirect(url)


@require_GET
def signed_in(request: HttpRequest) -> HttpResponse:
    """Where the server's authorization server sends the person back (the redirect URI)."""
    pending = request.session.get(PENDING, {})
    flow = pending.pop(request.GET.get("state", ""), None)
    request.session[PENDING] = pending
    if flow is None:
        messages.error(request, STALE)
        return redirect("mcp_client:tools")
    server = _per_user_server(flow["server"])
    if "code" not in request.GET:
        why = request.GET.get("error_description") or request.GET.get("error") or _("no reason")
        messages.error(
            request,
            _("%(server)s did not connect: %(why)s") % {"server": server.name, "why": why[:200]},
        )
        return redirect("mcp_client:tools")
    try:
        granted = async_to_sync(signin.finish)(
            flow, code=request.GET["code"], state=request.GET["state"], iss=request.GET.get("iss")
        )
        tools = async_to_sync(list_tools_with)(server, granted.tokens.access_token)
    except signin.SignInFailed as error:
        messages.error(request, str(error))
        return redirect("mcp_client:tools")
    except Exception:
        messages.error(request, UNLISTED % {"server": server.name})
        return redirect("mcp_client:tools")
    signin.keep(request.user, server, granted, tools)
    messages.success(request, _("Connected to %(server)s.") % {"server": server.name})
    return redirect("mcp_client:tools")


@require_POST
def disconnect(request: HttpRequest, server: str) -> HttpResponse:
    if signin.forget(request.user, server):
        messages.success(request, _("Disconnected from %(server)s.") % {"server": server})
    return redirect("mcp_client:tools")


# --- The form ---------------------------------------------------------------------------------


def _form(request: HttpRequest) -> dict[str, str]:
    return {name: request.POST.get(name, "").strip() for name in FIELDS}


def _data(form: dict[str, str]) -> dict:
    """The form's values as the API takes a rule: `match` one `name = glob` per line; empty
    fields left out."""
    data: dict = {
        k: v for k, v in form.items() if v and k not in ("match", "shadow", "quorum", "approvers")
    }
    quorum = form.get("quorum", "").strip() or "1"
    data["quorum"] = int(quorum) if quorum.isdigit() else quorum
    data["approvers"] = [
        name.strip() for name in form.get("approvers", "").split(",") if name.strip()
    ]
    match = {}
    for line in form.get("match", "").splitlines():
        if line.strip():
            name, sep, glob = line.partition("=")
            # A line without "=" is kept whole as a name with no glob, which validation refuses.
            match[name.strip()] = glob.strip() if sep else ""
    data["match"] = match
    data["shadow"] = form.get("shadow") == "on"
    return data


def _as_form(rule) -> dict:
    return {
        "scope": rule.scope,
        "conversationId": rule.conversation_id or "",
        "agent": rule.agent,
        "server": rule.server,
        "tool": rule.tool,
        "match": "\n".join(f"{name} = {glob}" for name, glob in (rule.match or {}).items()),
        "effect": rule.effect,
        "expiresAt": rule.expires_at.isoformat() if rule.expires_at else "",
        "maxUses": rule.max_uses or "",
        "shadow": "on" if rule.shadow else "",
        "quorum": "" if rule.quorum == 1 else ("all" if rule.quorum == 0 else rule.quorum),
        "approvers": ", ".join(rule.approvers or ()),
    }


def _errors(error: ValidationError) -> dict[str, str]:
    """Each refused field (its API name; "" for the rule as a whole): why, in the page's
    language."""
    found: dict[str, str] = {}
    for item in error.errors():
        name = str(item["loc"][0]) if item["loc"] else ""
        if not name:  # a rule-wide check names its field first ("conversationId: ...")
            name = item["msg"].removeprefix("Value error, ").partition(":")[0]
        found.setdefault(name, str(FIELD_ERRORS.get(name, RULE_REFUSED)))
    return found


def _conversations(request: HttpRequest):
    return sidebar_conversations(user=request.user, limit=CONVERSATIONS_OFFERED)
