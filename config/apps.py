from django.contrib.admin.apps import AdminConfig


class ParleyAdminConfig(AdminConfig):
    """django.contrib.admin with Parley's site as `admin.site` (config.admin)."""

    default_site = "config.admin.ParleyAdminSite"
