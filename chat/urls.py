from django.urls import path

from chat import views

app_name = "chat"

urlpatterns = [
    path("", views.home, name="home"),
    path("conversations/", views.conversation_list, name="conversation_list"),
    path("conversations/search/", views.conversation_search, name="conversation_search"),
    path("conversations/new/", views.conversation_create, name="conversation_create"),
    path("c/<int:conversation_id>/", views.conversation_detail, name="conversation_detail"),
    path("c/<int:conversation_id>/messages/", views.post_message, name="post_message"),
    path("c/<int:conversation_id>/earlier/", views.earlier_messages, name="earlier_messages"),
    path("c/<int:conversation_id>/rename/", views.conversation_rename, name="conversation_rename"),
    path("c/<int:conversation_id>/pin/", views.conversation_pin, name="conversation_pin"),
    path("c/<int:conversation_id>/delete/", views.conversation_delete, name="conversation_delete"),
    path(
        "c/<int:conversation_id>/restore/", views.conversation_restore, name="conversation_restore"
    ),
    path("c/<int:conversation_id>/share/", views.share, name="share"),
    path(
        "c/<int:conversation_id>/members/<int:member_id>/remove/",
        views.unshare,
        name="unshare",
    ),
    path("c/<int:conversation_id>/retry/", views.retry, name="retry"),
    path("c/<int:conversation_id>/stop/", views.stop, name="stop"),
    path("c/<int:conversation_id>/regenerate/", views.regenerate, name="regenerate"),
    path(
        "c/<int:conversation_id>/messages/<int:message_id>/edit/",
        views.edit_message,
        name="edit_message",
    ),
]
