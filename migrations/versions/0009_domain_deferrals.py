"""send loop: suppressions from a relay's refusal, deferrals per recipient domain

Revision ID: 0009
Revises: 0007
Create Date: 2026-11-30 16:00:00

"""

import sqlalchemy as sa
from alembic import op

# revision identifiers, used by Alembic.
revision = "0009"
down_revision = "0007"
branch_labels = None
depends_on = None


def upgrade():
    op.create_table(
        "domain_deferral",
        sa.Column("domain", sa.String(length=255), nullable=False),
        sa.Column("deferred_until", sa.DateTime(timezone=True), nullable=False),
        sa.Column("reply_code", sa.Integer(), nullable=True),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("domain", name=op.f("pk_domain_deferral")),
    )
    with op.batch_alter_table("suppression", schema=None) as batch_op:
        batch_op.add_column(
            sa.Column(
                "source_attempt_id",
                sa.BigInteger().with_variant(sa.Integer(), "sqlite"),
                nullable=True,
            )
        )
        batch_op.create_foreign_key(
            "fk_suppression_source_attempt_id_email_attempt",
            "email_attempt",
            ["source_attempt_id"],
            ["id"],
            ondelete="SET NULL",
        )


def downgrade():
    with op.batch_alter_table("suppression", schema=None) as batch_op:
        batch_op.drop_constraint(
            "fk_suppression_source_attempt_id_email_attempt", type_="foreignkey"
        )
        batch_op.drop_column("source_attempt_id")
    op.drop_table("domain_deferral")
