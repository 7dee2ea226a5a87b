"""search: index events with their intent id

A prefix search walks the event index in (event, id) order, a page at a time.
With the id in the index, intents sharing one event (a campaign's thousands)
are walked in order too, instead of being sorted at each page.

Revision ID: 0005
Revises: 0004
Create Date: 2026-11-30 11:20:00

"""

from alembic import op

# revision identifiers, used by Alembic.
revision = "0005"
down_revision = "0004"
branch_labels = None
depends_on = None


def upgrade():
    with op.batch_alter_table("email_intent", schema=None) as batch_op:
        batch_op.drop_index("ix_email_intent_event")
        batch_op.create_index(
            "ix_email_intent_event",
            ["event", "id"],
            unique=False,
            postgresql_ops={"event": "varchar_pattern_ops"},
        )


def downgrade():
    with op.batch_alter_table("email_intent", schema=None) as batch_op:
        batch_op.drop_index("ix_email_intent_event")
        batch_op.create_index(
            "ix_email_intent_event",
            ["event"],
            unique=False,
            postgresql_ops={"event": "varchar_pattern_ops"},
        )
