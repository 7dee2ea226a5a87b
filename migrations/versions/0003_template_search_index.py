"""search by template: an index on (template, created_at)

The console lists intents newest first; filtering by a rarely used template
otherwise walks every row.

Revision ID: 0003
Revises: 0002
Create Date: 2026-11-29 09:40:00

"""
from alembic import op


# revision identifiers, used by Alembic.
revision = "0003"
down_revision = "0002"
branch_labels = None
depends_on = None


def upgrade():
    with op.batch_alter_table("email_intent", schema=None) as batch_op:
        batch_op.create_index(
            "ix_email_intent_template_created", ["template", "created_at"], unique=False
        )


def downgrade():
    with op.batch_alter_table("email_intent", schema=None) as batch_op:
        batch_op.drop_index("ix_email_intent_template_created")
