from django.urls import path

from questions import views

app_name = "questions"

urlpatterns = [
    path("questions/", views.inbox, name="inbox"),
    path(
        "c/<int:conversation_id>/questions/<str:tool_call_id>/answer/", views.answer, name="answer"
    ),
    path(
        "c/<int:conversation_id>/questions/<str:tool_call_id>/reject/", views.reject, name="reject"
    ),
    path("c/<int:conversation_id>/questions/<str:tool_call_id>/draft/", views.draft, name="draft"),
    path(
        "c/<int:conversation_id>/questions/<str:tool_call_id>/assign/", views.assign, name="assign"
    ),
    path(
        "c/<int:conversation_id>/questions/<str:tool_call_id>/decide/", views.decide, name="decide"
    ),
    path("c/<int:conversation_id>/approvals/decide-all/", views.decide_all, name="decide_all"),
    path(
        "c/<int:conversation_id>/approvals/deny-stops-step/",
        views.deny_stops_step,
        name="deny_stops_step",
    ),
    path(
        "c/<int:conversation_id>/questions/<str:tool_call_id>/respond/",
        views.respond,
        name="respond",
    ),
]
