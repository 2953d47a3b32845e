from django import forms
from django.contrib import admin
from django.utils.translation import gettext as _
from django.utils.translation import gettext_lazy

from webhooks import services
from webhooks.addresses import UnsafeUrl, check_url
from webhooks.models import Delivery, Webhook


class WebhookForm(forms.ModelForm):
    class Meta:
        model = Webhook
        fields = ["owner", "url"]

    def clean_url(self) -> str:
        url = self.cleaned_data["url"]
        try:
            check_url(url)
        except UnsafeUrl as refused:
            raise forms.ValidationError(refused.message) from None
        return url


class DisabledFilter(admin.SimpleListFilter):
    title = gettext_lazy("state")
    parameter_name = "disabled"

    def lookups(self, request, model_admin):
        return [("no", gettext_lazy("Enabled")), ("yes", gettext_lazy("Disabled"))]

    def queryset(self, request, queryset):
        if self.value() in ("no", "yes"):
            return queryset.filter(disabled_at__isnull=self.value() == "no")
        return queryset


@admin.register(Webhook)
class WebhookAdmin(admin.ModelAdmin):
    """Operators add webhooks for one user or, with no owner, for everyone's questions; the
    secret is shown once, in the message after adding. A disabled webhook says why, and may
    be enabled again (an action)."""

    form = WebhookForm
    list_display = ["url", "owner", "created_at", "disabled_at", "disabled_reason"]
    list_select_related = ["owner"]
    list_filter = [DisabledFilter, ("owner", admin.EmptyFieldListFilter)]
    search_fields = ["url", "owner__username"]
    readonly_fields = ["created_at", "disabled_at", "disabled_reason"]
    actions = ["enable_again"]

    @admin.action(
        description=gettext_lazy("Enable the selected webhooks again"),
        permissions=["change"],
    )
    def enable_again(self, request, queryset) -> None:
        enabled = services.enable_webhooks(webhooks=queryset)
        self.message_user(request, _("Webhooks enabled again: %(n)s") % {"n": enabled})

    def save_model(self, request, obj, form, change) -> None:
        secret = ""
        if not change:
            obj.secret = secret = services.new_secret()
        super().save_model(request, obj, form, change)
        if secret:
            self.message_user(
                request,
                _("The webhook's signing secret (copy it now, it is not shown again): %(s)s")
                % {"s": secret},
            )


@admin.register(Delivery)
class DeliveryAdmin(admin.ModelAdmin):
    """The delivery log: what was sent where, and how it went."""

    list_display = [
        "event_type",
        "channel",
        "webhook",
        "recipient",
        "status",
        "attempts",
        "last_status_code",
        "created_at",
        "delivered_at",
    ]
    list_filter = ["status", "channel", "event_type"]
    list_select_related = ["webhook", "recipient"]
    search_fields = ["event_id", "webhook__url", "recipient__username"]
    readonly_fields = [f.name for f in Delivery._meta.fields]

    def has_add_permission(self, request) -> bool:
        return False

    def has_change_permission(self, request, obj=None) -> bool:
        return False
