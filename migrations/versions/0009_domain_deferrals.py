"""send loop: suppressions from a relay's refusal, deferrals per recipient domain

Revision ID: 0009
Revises: 0008
Create Date: 2026-11-30 16:00:00

"""

import sqlalchemy as sa
from alembic import op

# revision identifiers, used by Alembic.
revision = "0009"
down_revision = "0008"
branch_labels = None
depends_on = None


def upgrade():
    with op.batch_alter_table("suppression", schema=None) as batch_op:
        batch_op.add_column(sa.Column("source_attempt_id", sa.BigInteger().with_variant(sa.Integer(), "sqlite"), nullable=True))
        batch_op.create_foreign_key(
            "fk_suppression_source_attempt_id_email_attempt",
            "email_attempt",
            ["source_attempt_id"],
            ["id"],
            ondelete="SET NULL",
        )


def downgrade():
    with op.batch_alter_table("suppression", schema=None) as batch_op:
        batch_op.drop_constraint("fk_suppression_source_attempt_id_email_attempt", type_="foreignkey")
        batch_op.drop_column("source_attempt_id")
