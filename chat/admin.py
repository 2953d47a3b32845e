"""Operators read transcripts here: read-only in the admin, though they may be deleted."""

from django.contrib import admin
from django.db.models import Count
from django.template.loader import render_to_string
from django.utils.translation import gettext_lazy as _

from chat.models import Conversation, Message
from chat.subagents import subagents_of


@admin.register(Conversation)
class ConversationAdmin(admin.ModelAdmin):
    list_display = ["__str__", "owner", "agent_state", "message_count", "parent", "updated_at"]
    list_filter = ["agent_state", ("parent", admin.EmptyFieldListFilter), "updated_at"]
    search_fields = ["title", "owner__username"]
    list_select_related = ["owner", "parent"]
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

    @admin.display(description=_("messages"), ordering="_message_count")
    def message_count(self, conversation: Conversation) -> int:
        return conversation._message_count

    @admin.display(description=_("transcript"))
    def transcript(self, conversation: Conversation) -> str:
        # The template autoescapes every message; nothing stored is trusted as HTML.
        messages = conversation.messages.order_by("order")
        return render_to_string("admin/chat/transcript.html", {"messages": messages})

    @admin.display(description=_("sub-agents"))
    def subagents(self, conversation: Conversation) -> str:
        """The sub-agents this conversation's agent started, each with its transcript."""
        return render_to_string(
            "admin/chat/subagents.html", {"subagents": subagents_of(conversation)}
        )

    def has_add_permission(self, request) -> bool:
        return False

    def has_change_permission(self, request, obj=None) -> bool:
        return False


@admin.register(Message)
class MessageAdmin(admin.ModelAdmin):
    list_display = ["conversation", "order", "role", "version", "updated_at"]
    list_filter = ["role"]
    list_select_related = ["conversation"]
    search_fields = ["conversation__title"]
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
