from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [("chat", "0003_turn_questions")]

    operations = [
        migrations.RenameField("conversation", "turn_questions", "turn_pauses"),
        migrations.AlterField(
            model_name="conversation",
            name="turn_pauses",
            field=models.PositiveIntegerField(default=0, verbose_name="pauses this turn"),
        ),
    ]
