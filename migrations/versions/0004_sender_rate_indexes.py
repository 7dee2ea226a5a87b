"""sender rates: index submitted, bounced and complained intents by time

The dashboard divides the intents that bounced or drew a complaint in the last
24 h and 7 days by the intents submitted in them; each figure is a range count
on one of these indexes. Bounces and complaints are rare, so their indexes hold
only the rows that have one.

Revision ID: 0004
Revises: 0003
Create Date: 2026-11-30 10:05:00

"""

import sqlalchemy as sa
from alembic import op

# revision identifiers, used by Alembic.
revision = "0004"
down_revision = "0003"
branch_labels = None
depends_on = None


def upgrade():
    with op.batch_alter_table("email_intent", schema=None) as batch_op:
        batch_op.create_index("ix_email_intent_submitted_at", ["submitted_at"], unique=False)
        batch_op.create_index(
            "ix_email_intent_bounced",
            ["bounced_at", "bounce_type"],
            unique=False,
            postgresql_where=sa.text("bounced_at IS NOT NULL"),
            sqlite_where=sa.text("bounced_at IS NOT NULL"),
        )
        batch_op.create_index(
            "ix_email_intent_complained",
            ["complained_at"],
            unique=False,
            postgresql_where=sa.text("complained_at IS NOT NULL"),
            sqlite_where=sa.text("complained_at IS NOT NULL"),
        )


def downgrade():
    with op.batch_alter_table("email_intent", schema=None) as batch_op:
        batch_op.drop_index("ix_email_intent_complained")
        batch_op.drop_index("ix_email_intent_bounced")
        batch_op.drop_index("ix_email_intent_submitted_at")
