from django.urls import path

from webhooks import views

app_name = "webhooks"

urlpatterns = [
    path("settings/webhooks/", views.webhooks, name="settings"),
    path("settings/webhooks/<int:webhook_id>/delete/", views.delete, name="delete"),
    path("settings/webhooks/<int:webhook_id>/enable/", views.enable, name="enable"),
]
