"""provider events: why an event waits unmatched

An event is matched by its provider id together with the recipient it names
(and its Message-ID when present); one that matches no intent, or several,
waits unmatched and says why in ``unmatched_reason``.

Revision ID: 0006
Revises: 0005
Create Date: 2026-11-30 16:00:00

"""

import sqlalchemy as sa
from alembic import op

# revision identifiers, used by Alembic.
revision = "0006"
down_revision = "0005"
branch_labels = None
depends_on = None


def upgrade():
    with op.batch_alter_table("provider_event", schema=None) as batch_op:
        batch_op.add_column(sa.Column("unmatched_reason", sa.Text(), nullable=True))


def downgrade():
    with op.batch_alter_table("provider_event", schema=None) as batch_op:
        batch_op.drop_column("unmatched_reason")
