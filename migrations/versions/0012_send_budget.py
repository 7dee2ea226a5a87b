"""send budget: the token bucket of the send rate and the hourly send counts

``send_budget`` holds the bucket every worker takes tokens from
(``CONSOLE_SEND_RATE``); ``send_count`` the messages claimed per hour, for the
rolling 24-hour quota (``CONSOLE_SEND_DAILY_QUOTA``). Times are seconds since
the epoch.

Revision ID: 0012
Revises: 0011
Create Date: 2026-12-10 10:00:00

"""

import sqlalchemy as sa
from alembic import op

# revision identifiers, used by Alembic.
revision = "0012"
down_revision = "0011"
branch_labels = None
depends_on = None


def upgrade():
    op.create_table(
        "send_budget",
        sa.Column("name", sa.String(length=20), nullable=False),
        sa.Column("tokens", sa.Float(), nullable=False),
        sa.Column("refilled_at", sa.Float(), nullable=False),
        sa.Column("factor", sa.Float(), server_default=sa.text("1"), nullable=False),
        sa.Column("slowed_at", sa.Float(), server_default=sa.text("0"), nullable=False),
        sa.Column("taken", sa.Integer(), server_default=sa.text("0"), nullable=False),
        sa.PrimaryKeyConstraint("name", name=op.f("pk_send_budget")),
    )
    op.create_table(
        "send_count",
        sa.Column("hour_start", sa.Integer(), nullable=False),
        sa.Column("sent", sa.Integer(), nullable=False),
        sa.PrimaryKeyConstraint("hour_start", name=op.f("pk_send_count")),
    )


def downgrade():
    op.drop_table("send_count")
    op.drop_table("send_budget")
