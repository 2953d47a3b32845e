from django.apps import AppConfig
from django.utils.translation import gettext_lazy as _


class ApiConfig(AppConfig):
    name = "api"
    verbose_name = _("API")

    def ready(self) -> None:
        from accounts import settings_page, signals
        from api import tokens

        signals.signed_out_everywhere.connect(
            tokens.signed_out_everywhere, dispatch_uid="parley-revoke-tokens"
        )
        settings_page.add_link(
            settings_page.Link(
                name="api.tokens",
                label=_("API tokens"),
                description=_("For scripts and the terminal client."),
                url_name="api_tokens",
                order=100,
            )
        )
