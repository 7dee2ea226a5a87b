"""workers: when a worker stopped cleanly, so the dashboard tells a stop from a crash

Revision ID: 0018
Revises: 0017
Create Date: 2026-12-02 12:00:00

"""

import sqlalchemy as sa
from alembic import op

# revision identifiers, used by Alembic.
revision = "0018"
down_revision = "0017"
branch_labels = None
depends_on = None


def upgrade():
    with op.batch_alter_table("worker_heartbeat") as batch:
        batch.add_column(sa.Column("stopped_at", sa.DateTime(timezone=True), nullable=True))


def downgrade():
    with op.batch_alter_table("worker_heartbeat") as batch:
        batch.drop_column("stopped_at")
