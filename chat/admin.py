"""Operators read transcripts here: read-only in the admin, though they may be deleted."""

import json

from django.contrib import admin
from django.core.serializers.json import DjangoJSONEncoder
from django.db.models import Count
from django.http import HttpResponse
from django.template.loader import render_to_string
from django.utils import timezone
from django.utils.translation import gettext_lazy as _

from chat.models import AgentState, Conversation, Message
from chat.selectors import subagents_of


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


@admin.register(Conversation)
class ConversationAdmin(admin.ModelAdmin):
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
        # The template autoescapes every message; only assistant markdown becomes HTML, through
        # the app's own sanitiser (chat.markdown).
        messages = conversation.messages.order_by("order")
        return render_to_string("admin/chat/transcript.html", {"messages": messages})

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
