from django.contrib import admin

from accounts.models import Preferences


@admin.register(Preferences)
class PreferencesAdmin(admin.ModelAdmin):
    list_display = ["user", "theme", "notify_in_browser", "question_expire_after"]
    search_fields = ["user__username"]
