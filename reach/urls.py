from django.urls import path

from reach import views

app_name = "reach"

urlpatterns = [
    path("answer/<str:token>/", views.answer, name="answer"),
    path("sw.js", views.service_worker, name="service_worker"),
    path("settings/email/", views.change_address, name="change_address"),
    path("settings/email/confirm/<str:token>/", views.confirm_address, name="confirm_address"),
    path("settings/push/subscribe/", views.subscribe, name="push_subscribe"),
    path("settings/push/unsubscribe/", views.unsubscribe, name="push_unsubscribe"),
]
