"""Operators see every question here, read only: what was asked, and who resolved it, when,
how and through which channel, and whom it was assigned to, by whom and when (the audit),
with each vote of an approval that wanted several people's Allow; and every approval rule,
read only (rules are changed through Settings, Tools or the API, which check them)."""

from django.contrib import admin

from questions.models import ApprovalRule, ApprovalVote, Question


class VoteInline(admin.TabularInline):
    """Each person's Allow or Deny of an approval that wanted several (a rule's quorum)."""

    model = ApprovalVote
    fields = ["user", "decision", "via", "created_at"]
    readonly_fields = fields
    extra = 0
    can_delete = False

    def has_add_permission(self, request, obj=None) -> bool:
        return False


@admin.register(Question)
class QuestionAdmin(admin.ModelAdmin):
    list_display = [
        "tool_call_id",
        "kind",
        "status",
        "conversation",
        "assigned_to",
        "answered_by",
        "answered_via",
        "created_at",
        "answered_at",
    ]
    list_filter = ["status", "kind", "answered_via", "created_at"]
    list_select_related = ["conversation", "answered_by", "assigned_to"]
    search_fields = ["tool_call_id", "conversation__title", "conversation__owner__username"]
    date_hierarchy = "created_at"
    readonly_fields = [field.name for field in Question._meta.fields]
    inlines = [VoteInline]

    def has_add_permission(self, request) -> bool:
        return False

    def has_change_permission(self, request, obj=None) -> bool:
        return False


@admin.register(ApprovalRule)
class ApprovalRuleAdmin(admin.ModelAdmin):
    list_display = [
        "id",
        "scope",
        "user",
        "conversation",
        "agent",
        "server",
        "tool",
        "match",
        "effect",
        "shadow",
        "quorum",
        "uses",
        "max_uses",
        "expires_at",
        "created_at",
    ]
    list_filter = ["scope", "effect", "agent", "shadow"]
    list_select_related = ["user", "conversation"]
    search_fields = ["tool", "server", "user__username"]
    readonly_fields = [field.name for field in ApprovalRule._meta.fields]

    def has_add_permission(self, request) -> bool:
        return False

    def has_change_permission(self, request, obj=None) -> bool:
        return False
