"""workers: the product version each worker runs, shown on the dashboard

Revision ID: 0014
Revises: 0013
Create Date: 2026-12-01 12:00:00

"""

import sqlalchemy as sa
from alembic import op

# revision identifiers, used by Alembic.
revision = "0014"
down_revision = "0013"
branch_labels = None
depends_on = None


def upgrade():
    with op.batch_alter_table("worker_heartbeat") as batch:
        batch.add_column(sa.Column("version", sa.String(length=64), nullable=True))


def downgrade():
    with op.batch_alter_table("worker_heartbeat") as batch:
        batch.drop_column("version")
