"""console security: login failures, session generations

Failed logins are counted in the database (``login_failure_count``), per
(username, client address) and per address, so every process shares the count
and it survives a restart. Each account has a ``session_generation``, kept in
its login sessions: raising it (logout, a new password, a role change,
deactivation) ends them all.

Revision ID: 0010
Revises: 0009
Create Date: 2026-11-30 17:00:00

"""

import sqlalchemy as sa
from alembic import op

# revision identifiers, used by Alembic.
revision = "0010"
down_revision = "0009"
branch_labels = None
depends_on = None


def upgrade():
    op.create_table(
        "login_failure_count",
        sa.Column("username", sa.String(length=100), nullable=False),
        sa.Column("address", sa.String(length=64), nullable=False),
        sa.Column("failures", sa.Integer(), nullable=False),
        sa.Column("first_failure_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("last_failure_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("retry_at", sa.DateTime(timezone=True), nullable=True),
        sa.PrimaryKeyConstraint("username", "address", name=op.f("pk_login_failure_count")),
    )
    with op.batch_alter_table("login_failure_count", schema=None) as batch_op:
        batch_op.create_index(
            batch_op.f("ix_login_failure_count_last_failure_at"), ["last_failure_at"], unique=False
        )
    with op.batch_alter_table("operator_user", schema=None) as batch_op:
        batch_op.add_column(
            sa.Column(
                "session_generation", sa.Integer(), server_default=sa.text("0"), nullable=False
            )
        )


def downgrade():
    with op.batch_alter_table("operator_user", schema=None) as batch_op:
        batch_op.drop_column("session_generation")
    with op.batch_alter_table("login_failure_count", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_login_failure_count_last_failure_at"))
    op.drop_table("login_failure_count")
