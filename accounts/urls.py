from django.urls import path

from accounts import views

app_name = "accounts"

urlpatterns = [
    path("settings/", views.preferences, name="preferences"),
    path("settings/theme/", views.theme, name="theme"),
    path("settings/sign-out-everywhere/", views.sign_out_everywhere, name="sign_out_everywhere"),
]
