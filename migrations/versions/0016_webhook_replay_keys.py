"""webhook_replay_key: the keys of signed webhook requests already recorded, for every process

Revision ID: 0016
Revises: 0015
Create Date: 2026-12-02 09:00:00

"""

import sqlalchemy as sa
from alembic import op

# revision identifiers, used by Alembic.
revision = "0016"
down_revision = "0015"
branch_labels = None
depends_on = None


def upgrade():
    op.create_table(
        "webhook_replay_key",
        sa.Column("source", sa.String(length=20), nullable=False),
        sa.Column("key_digest", sa.String(length=64), nullable=False),
        sa.Column("expires_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("source", "key_digest", name=op.f("pk_webhook_replay_key")),
    )
    with op.batch_alter_table("webhook_replay_key") as batch:
        batch.create_index(
            batch.f("ix_webhook_replay_key_expires_at"), ["expires_at"], unique=False
        )


def downgrade():
    with op.batch_alter_table("webhook_replay_key") as batch:
        batch.drop_index(batch.f("ix_webhook_replay_key_expires_at"))
    op.drop_table("webhook_replay_key")
