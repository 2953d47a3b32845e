from django.contrib import admin

from mcp_client.models import SignIn


@admin.register(SignIn)
class SignInAdmin(admin.ModelAdmin):
    """Who connected which server with their own account, and since when: read-only, never the
    tokens; deleting one disconnects it (its user can connect again)."""

    list_display = ["user", "server", "connected_at", "refreshed_at", "problem"]
    list_filter = ["server"]
    list_select_related = ["user"]
    search_fields = ["user__username", "server"]
    fields = ["user", "server", "connected_at", "refreshed_at", "expires_at", "problem"]
    readonly_fields = fields

    def has_add_permission(self, request) -> bool:
        return False

    def has_change_permission(self, request, obj=None) -> bool:
        return False
