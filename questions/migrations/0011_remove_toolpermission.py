"""The "Always allow"s are approval rules now (0010 copied them): their table goes. Apart from
0010 so that no transaction both writes rows and alters a table with deferred constraints."""

from django.conf import settings
from django.db import migrations


class Migration(migrations.Migration):

    dependencies = [
        ('questions', '0010_approval_rules'),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    operations = [
        migrations.RemoveConstraint(
            model_name='toolpermission',
            name='tool_permission_unique',
        ),
        migrations.RemoveField(
            model_name='toolpermission',
            name='user',
        ),
        migrations.DeleteModel(
            name='ToolPermission',
        ),
    ]
