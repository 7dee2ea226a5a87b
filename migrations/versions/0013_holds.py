"""holds: an operator stops a lane, a template or a recipient domain until released

Revision ID: 0013
Revises: 0012
Create Date: 2026-12-01 10:00:00

"""

import sqlalchemy as sa
from alembic import op

# revision identifiers, used by Alembic.
revision = "0013"
down_revision = "0012"
branch_labels = None
depends_on = None


def upgrade():
    op.create_table(
        "intent_hold",
        sa.Column("id", sa.Integer(), autoincrement=True, nullable=False),
        sa.Column("kind", sa.String(length=20), nullable=False),
        sa.Column("value", sa.String(length=255), nullable=False),
        sa.Column("template_version", sa.Integer(), nullable=True),
        sa.Column("reason", sa.Text(), nullable=False),
        sa.Column("held_by", sa.String(length=100), nullable=False),
        sa.Column("held_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("until", sa.DateTime(timezone=True), nullable=True),
        sa.Column("released_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("released_by", sa.String(length=100), nullable=True),
        sa.CheckConstraint(
            "kind IN ('lane', 'template', 'domain')", name=op.f("ck_intent_hold_kind")
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_intent_hold")),
    )


def downgrade():
    op.drop_table("intent_hold")
