"""Operators read transcripts here: read-only in the admin, though they may be deleted."""

import json
import re
from urllib.parse import urlencode

from django.contrib import admin
from django.contrib.admin.utils import quote, unquote
from django.core.exceptions import PermissionDenied
from django.core.serializers.json import DjangoJSONEncoder
from django.db.models import Count
from django.http import Http404, HttpResponse, QueryDict
from django.template.loader import render_to_string
from django.template.response import TemplateResponse
from django.urls import path, reverse
from django.utils import timezone
from django.utils.translation import gettext_lazy as _

from chat.models import AgentState, Conversation, Membership, Message
from chat.paging import TranscriptPage, transcript_page
from chat.selectors import subagents_of

# Messages on a page of the transcript: the conversation's page shows the newest ones, and
# links to pages of earlier ones (ConversationAdmin.transcript_view).
TRANSCRIPT_PAGE = 100
# A place in the transcript as a link names it: a message's `order` (ASCII digits, and short
# enough for the column: an unsigned 32-bit integer).
PLACE = re.compile(r"[0-9]{1,9}")


class WaitingForAnswerFilter(admin.SimpleListFilter):
    """Conversations whose agent is paused on a question the user has not resolved yet."""

    title = _("waiting for an answer")
    parameter_name = "waiting"

    def lookups(self, request, model_admin):
        return [("yes", _("Yes")), ("no", _("No"))]

    def queryset(self, request, queryset):
        if self.value() == "yes":
            return queryset.filter(agent_state=AgentState.AWAITING_USER)
        if self.value() == "no":
            return queryset.exclude(agent_state=AgentState.AWAITING_USER)
        return queryset


class MembershipInline(admin.TabularInline):
    """Whom the owner shares the conversation with, read only: only its owner changes that
    (chat.sharing), so a change always reaches the member's open pages."""

    model = Membership
    fields = ["user", "role", "added_at"]
    readonly_fields = fields
    extra = 0
    can_delete = False

    def has_add_permission(self, request, obj=None) -> bool:
        return False

    def has_change_permission(self, request, obj=None) -> bool:
        return False


@admin.register(Conversation)
class ConversationAdmin(admin.ModelAdmin):
    inlines = [MembershipInline]
    list_display = ["__str__", "owner", "agent_state", "message_count", "parent", "updated_at"]
    list_filter = [
        "agent_state",
        WaitingForAnswerFilter,
        ("parent", admin.EmptyFieldListFilter),
        "updated_at",
    ]
    # messages__blocks: a case-insensitive match on the stored JSON's text (questions, options,
    # answers, tool calls and results included), on SQLite and PostgreSQL alike.
    search_fields = ["title", "owner__username", "messages__blocks"]
    search_help_text = _("Searches titles, owners and the text of every message.")
    list_select_related = ["owner", "parent"]
    actions = ["export_json"]
    fields = [
        "title",
        "owner",
        "agent_state",
        "parent",
        "created_at",
        "updated_at",
        "transcript",
        "subagents",
    ]
    readonly_fields = fields

    class Media:
        css = {"all": ["admin-parley/transcript.css"]}

    def get_queryset(self, request):
        return super().get_queryset(request).annotate(_message_count=Count("messages"))

    def get_search_results(self, request, queryset, search_term):
        results, may_have_duplicates = super().get_search_results(request, queryset, search_term)
        escaped = json.dumps(search_term.strip())[1:-1]
        if escaped != search_term.strip():
            # SQLite keeps JSON as text with non-ASCII characters escaped (\u4f60): a word in
            # Chinese or with accents is found in that form too.
            matching = Message.objects.filter(blocks__icontains=escaped).values("conversation")
            results |= queryset.filter(pk__in=matching)
        return results, may_have_duplicates

    @admin.display(description=_("messages"), ordering="_message_count")
    def message_count(self, conversation: Conversation) -> int:
        return conversation._message_count

    @admin.display(description=_("transcript"))
    def transcript(self, conversation: Conversation) -> str:
        """The newest messages, with a link to the pages of earlier ones."""
        page = transcript_page(
            conversation.messages.select_related("author"), limit=TRANSCRIPT_PAGE
        )
        return render_to_string(
            "admin/chat/transcript.html", self.transcript_context(conversation, page)
        )

    def transcript_context(self, conversation: Conversation, page: TranscriptPage) -> dict:
        # The template autoescapes every message; only assistant markdown becomes HTML, through
        # the app's own sanitiser (chat.markdown).
        url = reverse(
            f"{self.admin_site.name}:chat_conversation_transcript", args=[quote(conversation.pk)]
        )

        def link(**place: int) -> str:
            return f"{url}?{urlencode(place)}"

        return {
            "messages": page.messages,
            "page": page,
            "total": getattr(conversation, "_message_count", None),
            "earlier_url": link(before=page.first.order) if page.has_older else "",
            "later_url": link(after=page.last.order) if page.has_newer else "",
        }

    def get_urls(self):
        view = self.admin_site.admin_view(self.transcript_view)
        return [
            path("<path:object_id>/transcript/", view, name="chat_conversation_transcript"),
            *super().get_urls(),
        ]

    def transcript_view(self, request, object_id: str) -> TemplateResponse:
        """A page of a conversation's transcript: ?before=N, the messages just before the one
        at order N; ?after=N, those just after it. Anything else is a 404."""
        conversation = self.get_object(request, unquote(object_id))
        if conversation is None:
            raise Http404
        if not self.has_view_permission(request, conversation):
            raise PermissionDenied
        page = transcript_page(
            conversation.messages.select_related("author"),
            limit=TRANSCRIPT_PAGE,
            **transcript_place(conversation, request.GET),
        )
        context = {
            **self.admin_site.each_context(request),
            **self.transcript_context(conversation, page),
            "opts": self.opts,
            "original": conversation,
            "title": _("Transcript of %(conversation)s") % {"conversation": conversation},
            "media": self.media,
        }
        return TemplateResponse(request, "admin/chat/conversation_transcript.html", context)

    @admin.display(description=_("sub-agents"))
    def subagents(self, conversation: Conversation) -> str:
        """The sub-agents this conversation's agent started, each with its transcript."""
        return render_to_string(
            "admin/chat/subagents.html", {"subagents": subagents_of(conversation)}
        )

    # "view": only staff who may read conversations in the admin may export them.
    @admin.action(description=_("Export selected conversations as JSON"), permissions=["view"])
    def export_json(self, request, queryset) -> HttpResponse:
        conversations = (
            Conversation.objects.filter(pk__in=queryset.values("pk"))
            .select_related("owner")
            .prefetch_related("messages")
            .order_by("pk")
        )
        data = {
            "exportedAt": timezone.now(),
            "conversations": [export_conversation(c) for c in conversations],
        }
        response = HttpResponse(
            json.dumps(data, cls=DjangoJSONEncoder, ensure_ascii=False, indent=2),
            content_type="application/json; charset=utf-8",
        )
        stamp = timezone.now().strftime("%Y%m%d-%H%M%S")
        response["Content-Disposition"] = (
            f'attachment; filename="parley-conversations-{stamp}.json"'
        )
        return response

    def has_add_permission(self, request) -> bool:
        return False

    def has_change_permission(self, request, obj=None) -> bool:
        return False


def transcript_place(conversation: Conversation, query: QueryDict) -> dict[str, int]:
    """`before` or `after` from the query, when it is the order of one of the conversation's
    messages; Http404 for anything else (both, or a place that is no message)."""
    places = [(name, query[name]) for name in ("before", "after") if name in query]
    if not places:
        return {}
    if len(places) > 1:
        raise Http404
    [(name, value)] = places
    if not PLACE.fullmatch(value) or not conversation.messages.filter(order=int(value)).exists():
        raise Http404
    return {name: int(value)}


def export_conversation(conversation: Conversation) -> dict:
    """A conversation's metadata and its messages with their blocks exactly as stored."""
    return {
        "id": conversation.pk,
        "title": conversation.title,
        "owner": conversation.owner.get_username(),
        "agentState": conversation.agent_state,
        "parentId": conversation.parent_id,
        "createdAt": conversation.created_at,
        "updatedAt": conversation.updated_at,
        "messages": [
            {
                "id": message.pk,
                "order": message.order,
                "role": message.role,
                "createdAt": message.created_at,
                "updatedAt": message.updated_at,
                "blocks": message.blocks,
            }
            for message in sorted(conversation.messages.all(), key=lambda m: m.order)
        ],
    }


@admin.register(Message)
class MessageAdmin(admin.ModelAdmin):
    list_display = ["conversation", "order", "role", "version", "updated_at"]
    list_filter = ["role"]
    list_select_related = ["conversation"]
    search_fields = ["conversation__title", "blocks"]
    readonly_fields = [
        "conversation",
        "role",
        "order",
        "blocks",
        "version",
        "seq",
        "created_at",
        "updated_at",
    ]

    def has_add_permission(self, request) -> bool:
        return False

    def has_change_permission(self, request, obj=None) -> bool:
        return False
