from django.contrib import admin

from reach.models import PushSubscription


@admin.register(PushSubscription)
class PushSubscriptionAdmin(admin.ModelAdmin):
    """The browsers that get Web Push: read-only; deleting one stops its pushes (its user
    can turn the switch on again)."""

    list_display = ["user", "endpoint", "created_at"]
    list_select_related = ["user"]
    search_fields = ["user__username", "endpoint"]
    readonly_fields = [f.name for f in PushSubscription._meta.fields]

    def has_add_permission(self, request) -> bool:
        return False

    def has_change_permission(self, request, obj=None) -> bool:
        return False
