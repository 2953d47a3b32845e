from django.apps import AppConfig
from django.utils.translation import gettext_lazy as _


class AccountsConfig(AppConfig):
    name = "accounts"
    verbose_name = _("Accounts")

    def ready(self) -> None:
        from accounts import settings_page

        # The page's own section below the form goes by `order` among those other apps add
        # (docs/developers/architecture.md, "The Settings page").
        settings_page.add_section(
            settings_page.Section(
                name="accounts.sessions", template="accounts/preferences.html#sessions", order=200
            )
        )
