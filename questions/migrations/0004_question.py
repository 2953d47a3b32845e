import django.db.models.deletion
import django.utils.timezone
from django.conf import settings
from django.db import migrations, models

STATUSES = [
    ("pending", "Pending"),
    ("answered", "Answered"),
    ("auto_resolved", "Answered by a message"),
    ("rejected", "Rejected"),
    ("expired", "Expired"),
    ("cancelled", "Cancelled"),
]
VIAS = [
    ("browser", "browser"),
    ("api", "API"),
    ("terminal", "terminal"),
    ("auto-resolve", "a message"),
    ("expiry", "expiry"),
]


class Migration(migrations.Migration):
    dependencies = [
        ("chat", "0007_message_search_text"),
        ("questions", "0003_question_drafts"),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    operations = [
        # The Question's reminder index takes the Deadline's name: that one goes first.
        migrations.RemoveIndex(model_name="deadline", name="question_reminder_due"),
        migrations.CreateModel(
            name="Question",
            fields=[
                ("id", models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name="ID")),
                ("tool_call_id", models.CharField(max_length=64, verbose_name="tool call")),
                ("kind", models.CharField(choices=[("question", "Question"), ("ask_user_question", "Questions"), ("confirm_action", "Confirmation")], max_length=20, verbose_name="kind")),
                ("questions", models.JSONField(verbose_name="questions")),
                ("status", models.CharField(choices=STATUSES, default="pending", max_length=16, verbose_name="status")),
                ("answers", models.JSONField(blank=True, null=True, verbose_name="answers")),
                ("answer_text", models.TextField(blank=True, verbose_name="answer text")),
                ("answered_at", models.DateTimeField(blank=True, null=True, verbose_name="answered at")),
                ("answered_via", models.CharField(blank=True, choices=VIAS, max_length=16, verbose_name="answered via")),
                ("expires_at", models.DateTimeField(blank=True, null=True, verbose_name="expires")),
                ("remind_at", models.DateTimeField(blank=True, null=True, verbose_name="reminder due")),
                ("reminded_at", models.DateTimeField(blank=True, null=True, verbose_name="reminded")),
                ("created_at", models.DateTimeField(default=django.utils.timezone.now, verbose_name="asked")),
                ("updated_at", models.DateTimeField(default=django.utils.timezone.now, verbose_name="updated")),
                ("answered_by", models.ForeignKey(blank=True, null=True, on_delete=django.db.models.deletion.SET_NULL, related_name="+", to=settings.AUTH_USER_MODEL, verbose_name="answered by")),
                ("conversation", models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name="questions", to="chat.conversation", verbose_name="conversation")),
                ("message", models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name="questions", to="chat.message", verbose_name="message")),
                ("reply", models.ForeignKey(blank=True, null=True, on_delete=django.db.models.deletion.SET_NULL, related_name="+", to="chat.message", verbose_name="reply")),
            ],
            options={
                "verbose_name": "question",
                "verbose_name_plural": "questions",
                "ordering": ["-created_at", "-id"],
                "indexes": [
                    models.Index(condition=models.Q(("status", "pending")), fields=["conversation"], name="question_pending"),
                    models.Index(condition=models.Q(("expires_at__isnull", False), ("status", "pending")), fields=["expires_at"], name="question_expiry_due"),
                    models.Index(condition=models.Q(("remind_at__isnull", False), ("reminded_at__isnull", True), ("status", "pending")), fields=["remind_at"], name="question_reminder_due"),
                    models.Index(fields=["status", "-updated_at"], name="question_status_recent"),
                ],
                "constraints": [
                    models.UniqueConstraint(fields=("conversation", "tool_call_id"), name="question_tool_call_unique"),
                    models.CheckConstraint(condition=models.Q(("status__in", ["pending", "answered", "auto_resolved", "rejected", "expired", "cancelled"])), name="question_status"),
                    models.CheckConstraint(condition=models.Q(("answered_via", ""), ("answered_via__in", ["browser", "api", "terminal", "auto-resolve", "expiry"]), _connector="OR"), name="question_answered_via"),
                ],
            },
        ),
        # Drafts move from (conversation, tool call) to their question (0005 links them).
        migrations.AddField(
            model_name="questiondraft",
            name="question",
            field=models.OneToOneField(null=True, on_delete=django.db.models.deletion.CASCADE, related_name="draft", to="questions.question", verbose_name="question"),
        ),
        migrations.AlterField(
            model_name="questiondraft",
            name="conversation",
            field=models.ForeignKey(null=True, on_delete=django.db.models.deletion.CASCADE, related_name="question_drafts", to="chat.conversation", verbose_name="conversation"),
        ),
        migrations.AlterField(
            model_name="questiondraft",
            name="tool_call_id",
            field=models.CharField(blank=True, default="", max_length=64, verbose_name="tool call"),
        ),
    ]
