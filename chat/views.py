"""HTTP views: parse, call a service or selector, render. None writes to the ORM itself."""

from functools import wraps

from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.urls import Resolver404, resolve, reverse
from django.utils import timezone
from django.utils.html import escape
from django.utils.translation import gettext as _
from django.views.decorators.http import require_GET, require_http_methods, require_POST
from django_htmx.http import HttpResponseClientRedirect, HttpResponseClientRefresh, reswap, retarget

from chat import services, sharing
from chat.errors import ConversationNotFound, NotAllowed
from chat.models import Conversation, MemberRole
from chat.selectors import (
    Need,
    conversation_for_user,
    conversation_page,
    members_of,
    newest_conversation,
    search_snippets,
    sidebar_conversations,
    sidebar_groups,
    waiting_conversation_ids,
)
from core.errors import ParleyError, RateLimited, ServiceUnavailable

CONVERSATION = "chat/conversation.html"
# The alert every conversation page has (its composer's): where a refusal of an action that
# has no alert of its own is said.
PAGE_ALERT = "composer-error"
CONVERSATION_LIST = "chat/conversation_list.html"
SIDEBAR = "chat/sidebar.html"
# The sidebar lists this many conversations (the list page has them all).
SIDEBAR_SIZE = 50


def conversation_view(view):
    """Map ConversationNotFound (absent, or not the user's) to a 404, and NotAllowed (a
    member whose role does not allow the action, such as the owner's own) to its 403 in the
    page's alert. The view takes the conversation as `conversation_id`."""

    @wraps(view)
    def wrapper(request, *args, **kwargs):
        try:
            return view(request, *args, **kwargs)
        except ConversationNotFound:
            raise Http404(_("That conversation does not exist.")) from None
        except NotAllowed as error:
            return refusal(request, kwargs["conversation_id"], error, alert=PAGE_ALERT)

    return wrapper


@require_GET
def conversation_list(request: HttpRequest) -> HttpResponse:
    query = services.clean_search(request.GET.get("q", ""))
    context = {"query": query, "waiting": waiting_conversation_ids(user=request.user)}
    try:
        context["conversations"] = services.search_conversations(user=request.user, query=query)
    except ParleyError as error:
        context.update(conversations=[], error=error.message)
        response = render(request, CONVERSATION_LIST, context, status=error.status)
        return with_retry_after(response, error)
    return render(request, CONVERSATION_LIST, context)


@require_GET
def conversation_search(request: HttpRequest) -> HttpResponse:
    """The sidebar's list for its search box (htmx); without JavaScript the box submits to
    the list page instead. A refused search says why in the list's place."""
    query = services.clean_search(request.GET.get("q", ""))
    current_id = current_conversation_id(request)
    current = Conversation(pk=current_id) if current_id is not None else None
    try:
        context = sidebar_context(request, query=query, current=current)
    except ParleyError as error:
        context = {
            "query": query,
            "search_error": error.message,
            "waiting": waiting_conversation_ids(user=request.user),
        }
        response = render(request, f"{SIDEBAR}#list", context, status=error.status)
        return with_retry_after(response, error)
    return render(request, f"{SIDEBAR}#list", context)


def sidebar_context(request: HttpRequest, *, query: str = "", current=None) -> dict:
    """The sidebar's list: with no search, the conversations under their headings (pinned,
    then by day); with one, the matches, each with the words of it that match."""
    context = {
        "query": query,
        "waiting": waiting_conversation_ids(user=request.user),
        "current": current,
    }
    if not query:
        conversations = sidebar_conversations(user=request.user, limit=SIDEBAR_SIZE)
        context["sidebar_groups"] = sidebar_groups(conversations, today=timezone.localdate())
    else:
        conversations = services.search_conversations(
            user=request.user, query=query, limit=SIDEBAR_SIZE
        )
        found = search_snippets(conversation_ids=[c.pk for c in conversations], query=query)
        for conversation in conversations:
            conversation.snippet = found.get(conversation.pk, "")
    context["sidebar_conversations"] = conversations
    return context


@require_GET
def home(request: HttpRequest) -> HttpResponse:
    """Where a person lands (after logging in): their newest conversation, ready to write
    in, or a new one."""
    newest = newest_conversation(user=request.user)
    if newest is None:
        return redirect("chat:conversation_create")
    return redirect("chat:conversation_detail", conversation_id=newest.pk)


@require_http_methods(["GET", "POST"])
def conversation_create(request: HttpRequest) -> HttpResponse:
    """A blank composer; the first message sent from it creates the conversation (nothing is
    created before), and the page moves to the conversation's own address."""
    if request.method == "GET":
        return render_new_conversation(request)
    text = request.POST.get("text", "")
    try:
        message = services.start_conversation(owner=request.user, text=text)
    except ParleyError as error:
        response = render_new_conversation(
            request, text=text, error=error.message, status=error.status
        )
        return with_retry_after(response, error)
    url = reverse("chat:conversation_detail", args=[message.conversation_id])
    return HttpResponseClientRedirect(url) if request.htmx else redirect(url)


def render_new_conversation(
    request: HttpRequest, *, text: str = "", error: str = "", status: int = 200
) -> HttpResponse:
    """The blank composer's page; to htmx sending a first message that was refused, its
    composer alone."""
    context = {
        "conversation": Conversation(owner=request.user),  # not saved: none exists yet
        "text": text,
        "error": error,
    }
    if request.htmx and request.method == "POST":
        return render(request, f"{CONVERSATION}#composer", context, status=status)
    context.update(messages=[], earlier=None, cursor=0, **sidebar_context(request))
    return render(request, CONVERSATION, context, status=status)


@require_GET
@conversation_view
def conversation_detail(request: HttpRequest, conversation_id: int) -> HttpResponse:
    return render_conversation(request, conversation_id)


@require_GET
@conversation_view
def earlier_messages(request: HttpRequest, conversation_id: int) -> HttpResponse:
    """The page of messages before `?before=` (a message order), for "Load earlier messages":
    their items, and the button for the page before them if there is one."""
    try:
        before = int(request.GET.get("before", ""))
    except ValueError:
        return HttpResponse(_("That page of the transcript does not exist."), status=400)
    page = conversation_page(user=request.user, conversation_id=conversation_id, before=before)
    context = {
        "conversation": page.conversation,
        "messages": page.messages,
        "earlier": page.earlier,
    }
    return render(request, f"{CONVERSATION}#earlier_page", context)


@require_POST
@conversation_view
def post_message(request: HttpRequest, conversation_id: int) -> HttpResponse:
    text = request.POST.get("text", "")
    try:
        message = services.post_user_message(
            user=request.user, conversation_id=conversation_id, text=text
        )
    except ConversationNotFound:
        raise
    except ParleyError as error:
        if request.htmx:
            conversation = conversation_for_user(user=request.user, conversation_id=conversation_id)
            context = {"conversation": conversation, "text": text, "error": error.message}
            response = render(request, f"{CONVERSATION}#composer", context, status=error.status)
            return with_retry_after(response, error)
        response = render_conversation(
            request, conversation_id, text=text, error=error.message, status=error.status
        )
        return with_retry_after(response, error)
    if request.htmx:
        # The conversation as the service left it (a new composer, disabled while a turn runs).
        context = {"conversation": message.conversation}
        return render(request, f"{CONVERSATION}#composer", context)
    return redirect("chat:conversation_detail", conversation_id=conversation_id)


@require_POST
@conversation_view
def conversation_rename(request: HttpRequest, conversation_id: int) -> HttpResponse:
    conversation = services.rename_conversation(
        user=request.user, conversation_id=conversation_id, title=request.POST.get("title", "")
    )
    if from_sidebar(request):
        return render_sidebar_list(request)
    if request.htmx:
        return render(request, f"{CONVERSATION_LIST}#conversation", {"conversation": conversation})
    return redirect("chat:conversation_list")


@require_POST
@conversation_view
def conversation_pin(request: HttpRequest, conversation_id: int) -> HttpResponse:
    """Pin (`pinned=1`) or unpin the conversation."""
    services.pin_conversation(
        user=request.user,
        conversation_id=conversation_id,
        pinned=request.POST.get("pinned") == "1",
    )
    if from_sidebar(request):
        return render_sidebar_list(request)
    return redirect("chat:conversation_list")


@require_POST
@conversation_view
def conversation_delete(request: HttpRequest, conversation_id: int) -> HttpResponse:
    """Delete, undoably for a while (services.delete_conversation): the sidebar says so, with
    an Undo button."""
    services.delete_conversation(user=request.user, conversation_id=conversation_id)
    if from_sidebar(request):
        return render_sidebar_list(request, deleted=conversation_id)
    if request.htmx:
        return HttpResponse("")
    return redirect("chat:conversation_list")


@require_POST
@conversation_view
def conversation_restore(request: HttpRequest, conversation_id: int) -> HttpResponse:
    """Undo a delete. The open page of the conversation itself lost its live updates with the
    delete, so it loads again."""
    services.restore_conversation(user=request.user, conversation_id=conversation_id)
    if request.htmx and current_conversation_id(request) == conversation_id:
        return HttpResponseClientRefresh()
    if from_sidebar(request):
        return render_sidebar_list(request)
    return redirect("chat:conversation_detail", conversation_id=conversation_id)


def from_sidebar(request: HttpRequest) -> bool:
    """An action from the sidebar's menu (htmx), answered with the sidebar's list."""
    return bool(request.htmx) and request.POST.get("from") == "sidebar"


def current_conversation_id(request: HttpRequest) -> int | None:
    """The conversation of the page an htmx request comes from, if it is one's."""
    path = request.htmx.current_url_abs_path if request.htmx else None
    try:
        match = resolve((path or "").split("?")[0])
    except Resolver404:
        return None
    if match.view_name != "chat:conversation_detail":
        return None
    return match.kwargs["conversation_id"]


def render_sidebar_list(request: HttpRequest, *, deleted: int | None = None) -> HttpResponse:
    """The sidebar's list after an action, for the page it was taken on (its search, its
    conversation); `deleted`: the conversation just deleted, offered back (Undo)."""
    query = services.clean_search(request.POST.get("q", ""))
    current_id = current_conversation_id(request)
    current = Conversation(pk=current_id) if current_id is not None else None
    try:
        context = sidebar_context(request, query=query, current=current)
    except ParleyError:  # the search is refused now: the list without it
        context = sidebar_context(request, current=current)
    context["deleted"] = deleted
    return render(request, f"{SIDEBAR}#list", context)


@require_POST
@conversation_view
def retry(request: HttpRequest, conversation_id: int) -> HttpResponse:
    return control_response(
        request,
        conversation_id,
        lambda: services.retry_turn(user=request.user, conversation_id=conversation_id),
        alert="retry-alert",
    )


@require_POST
@conversation_view
def stop(request: HttpRequest, conversation_id: int) -> HttpResponse:
    return control_response(
        request,
        conversation_id,
        lambda: services.stop_turn(user=request.user, conversation_id=conversation_id),
        alert="stop-alert",
    )


@require_POST
@conversation_view
def regenerate(request: HttpRequest, conversation_id: int) -> HttpResponse:
    return control_response(
        request,
        conversation_id,
        lambda: services.regenerate_reply(user=request.user, conversation_id=conversation_id),
        alert="regenerate-alert",
    )


@require_POST
@conversation_view
def edit_message(request: HttpRequest, conversation_id: int, message_id: int) -> HttpResponse:
    return control_response(
        request,
        conversation_id,
        lambda: services.edit_message(
            user=request.user,
            conversation_id=conversation_id,
            message_id=message_id,
            text=request.POST.get("text", ""),
        ),
        alert=f"edit-alert-{message_id}",
    )


def control_response(
    request: HttpRequest, conversation_id: int, action, *, alert: str
) -> HttpResponse:
    """Run a button's action (Retry, Stop, answer, Reject). The page updates over the
    websocket, so htmx needs no content back; a refusal is shown where the user acted: its
    message goes into the element `alert` (a role=alert beside the button or in the block),
    and what the user entered stays as it was."""
    try:
        action()
    except ConversationNotFound:
        raise
    except ParleyError as error:
        return refusal(request, conversation_id, error, alert=alert)
    if request.htmx:
        return HttpResponse(status=204)
    return redirect("chat:conversation_detail", conversation_id=conversation_id)


def refusal(
    request: HttpRequest, conversation_id: int, error: ParleyError, *, alert: str
) -> HttpResponse:
    """A refused action, said where the user acted: to htmx, its message alone, retargeted
    into the element `alert` of the page (static/parley.js); without htmx, the
    conversation's page with the message in its alert."""
    if request.htmx:
        response = HttpResponse(escape(error.message), status=error.status)
        return with_retry_after(reswap(retarget(response, f"#{alert}"), "innerHTML"), error)
    response = render_conversation(
        request, conversation_id, error=error.message, status=error.status
    )
    return with_retry_after(response, error)


# --- Sharing: the owner's panel of members ------------------------------------------------


@require_POST
@conversation_view
def share(request: HttpRequest, conversation_id: int) -> HttpResponse:
    """Add a member (or change their role): the panel's list again, or its refusal in the
    panel's alert with what was typed kept."""
    username = request.POST.get("username", "")
    role = request.POST.get("role", "")
    try:
        sharing.share_conversation(
            user=request.user, conversation_id=conversation_id, username=username, role=role
        )
    except (ConversationNotFound, NotAllowed):
        raise
    except ParleyError as error:
        return render_members(request, conversation_id, username=username, role=role, error=error)
    return render_members(request, conversation_id)


@require_POST
@conversation_view
def unshare(request: HttpRequest, conversation_id: int, member_id: int) -> HttpResponse:
    try:
        sharing.remove_member(
            user=request.user, conversation_id=conversation_id, member_id=member_id
        )
    except (ConversationNotFound, NotAllowed):
        raise
    except ParleyError as error:
        return render_members(request, conversation_id, error=error)
    return render_members(request, conversation_id)


def render_members(
    request: HttpRequest,
    conversation_id: int,
    *,
    username: str = "",
    role: str = MemberRole.PARTICIPANT,
    error: ParleyError | None = None,
) -> HttpResponse:
    """The share panel's body; without htmx, the conversation's page (a refusal says why)."""
    if not request.htmx:
        if error is not None:
            return render_conversation(
                request, conversation_id, share_error=error.message, status=error.status
            )
        return redirect("chat:conversation_detail", conversation_id=conversation_id)
    conversation = conversation_for_user(
        user=request.user, conversation_id=conversation_id, need=Need.MANAGE
    )
    context = {
        "conversation": conversation,
        "members": members_of(conversation),
        "share_username": username,
        "share_role": role,
        "share_error": error.message if error is not None else "",
        "share_refocus": True,  # the box for the next person (or to correct this one)
    }
    # A refusal is an alert in the panel, swapped in like the list (htmx-config swaps 4xx).
    status = error.status if error is not None else 200
    return render(request, f"{CONVERSATION}#members", context, status=status)


def with_retry_after(response: HttpResponse, error: ParleyError) -> HttpResponse:
    if isinstance(error, RateLimited):
        response["Retry-After"] = str(error.retry_after)
    return response


def render_conversation(
    request: HttpRequest,
    conversation_id: int,
    *,
    text: str = "",
    error: str = "",
    share_error: str = "",
    status=200,
) -> HttpResponse:
    page = conversation_page(user=request.user, conversation_id=conversation_id)
    conversation = page.conversation
    context = {
        "members": members_of(conversation) if conversation.shared else [],
        "share_error": share_error,
        "share_role": MemberRole.PARTICIPANT,
        "conversation": page.conversation,
        "messages": page.messages,
        "earlier": page.earlier,
        "cursor": page.cursor,
        "text": text,
        "error": error,
        **sidebar_context(request, current=page.conversation),
    }
    return render(request, CONVERSATION, context, status=status)


# --- Error pages: friendly, translated, never Django's debug page ------------------------------


def _error(request: HttpRequest, status: int, message: str) -> HttpResponse:
    return render(request, "error.html", {"status": status, "message": message}, status=status)


def bad_request(request: HttpRequest, exception=None) -> HttpResponse:
    return _error(request, 400, _("The request could not be understood (it may be too large)."))


def permission_denied(request: HttpRequest, exception=None) -> HttpResponse:
    return _error(request, 403, _("You are not allowed to do that."))


def page_not_found(request: HttpRequest, exception=None) -> HttpResponse:
    return _error(request, 404, _("There is nothing here."))


def server_error(request: HttpRequest) -> HttpResponse:
    return _error(request, 500, _("Something went wrong on our side. Please try again."))


def service_unavailable(request: HttpRequest) -> HttpResponse:
    """Redis cannot be reached (config.middleware.ServiceUnavailableMiddleware)."""
    error = ServiceUnavailable()
    response = _error(request, error.status, error.message)
    response["Retry-After"] = str(error.retry_after)
    return response
