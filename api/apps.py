from django.apps import AppConfig
from django.utils.translation import gettext_lazy as _


class ApiConfig(AppConfig):
    name = "api"
    verbose_name = _("API")

    def ready(self) -> None:
        from accounts.services import on_sign_out_everywhere
        from api.tokens import revoke_all_tokens

        on_sign_out_everywhere(revoke_all_tokens)
