from django.contrib import admin

from slackbot.models import SlackChannel, SlackLink, SlackMessage, SlackRefusal


@admin.register(SlackLink)
class SlackLinkAdmin(admin.ModelAdmin):
    list_display = ["user", "slack_user_id", "team_id", "requested_at", "confirmed_at"]
    list_select_related = ["user"]
    search_fields = ["user__username", "slack_user_id"]
    readonly_fields = ["user", "slack_user_id", "team_id", "requested_at", "confirmed_at"]


@admin.register(SlackChannel)
class SlackChannelAdmin(admin.ModelAdmin):
    list_display = ["conversation", "channel_id", "connected_by", "connected_at"]
    list_select_related = ["conversation", "connected_by"]
    readonly_fields = ["conversation", "connected_by", "connected_at"]


@admin.register(SlackMessage)
class SlackMessageAdmin(admin.ModelAdmin):
    list_display = ["question", "recipient", "channel", "shared", "ts", "posted_at", "closed_at"]
    list_select_related = ["question", "recipient"]
    readonly_fields = ["question", "recipient", "channel", "shared", "ts", "posted_at", "closed_at"]


@admin.register(SlackRefusal)
class SlackRefusalAdmin(admin.ModelAdmin):
    """The audit of clicks in Slack that answered nothing: read only."""

    list_display = ["at", "slack_user_id", "user", "question", "reason"]
    list_filter = ["reason"]
    list_select_related = ["user", "question"]

    def has_add_permission(self, request) -> bool:
        return False

    def has_change_permission(self, request, obj=None) -> bool:
        return False
