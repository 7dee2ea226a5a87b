"""drill_run: the summaries ``console drill --record`` keeps, for the dashboard's last drill

Revision ID: 0019
Revises: 0018
Create Date: 2026-12-03 20:00:00

"""

import sqlalchemy as sa
from alembic import op

# revision identifiers, used by Alembic.
revision = "0019"
down_revision = "0018"
branch_labels = None
depends_on = None


def upgrade():
    op.create_table(
        "drill_run",
        sa.Column("id", sa.Integer(), autoincrement=True, nullable=False),
        sa.Column("ran_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("version", sa.String(length=64), nullable=False),
        sa.Column("configuration", sa.String(length=64), nullable=False),
        sa.Column("database", sa.String(length=255), nullable=False),
        sa.Column("held", sa.Integer(), nullable=False),
        sa.Column("total", sa.Integer(), nullable=False),
        sa.Column("results", sa.JSON(), nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_drill_run")),
    )
    with op.batch_alter_table("drill_run") as batch:
        batch.create_index(batch.f("ix_drill_run_ran_at"), ["ran_at"], unique=False)


def downgrade():
    with op.batch_alter_table("drill_run") as batch:
        batch.drop_index(batch.f("ix_drill_run_ran_at"))
    op.drop_table("drill_run")
