import django.db.models.deletion
from django.db import migrations, models


class Migration(migrations.Migration):
    """Deadlines now live on the Question row, and drafts belong to their question."""

    dependencies = [("questions", "0005_question_rows")]

    operations = [
        migrations.RemoveConstraint(model_name="questiondraft", name="question_draft_unique"),
        migrations.RemoveField(model_name="questiondraft", name="conversation"),
        migrations.RemoveField(model_name="questiondraft", name="tool_call_id"),
        migrations.AlterField(
            model_name="questiondraft",
            name="question",
            field=models.OneToOneField(on_delete=django.db.models.deletion.CASCADE, related_name="draft", to="questions.question", verbose_name="question"),
        ),
        migrations.DeleteModel(name="Deadline"),
    ]
