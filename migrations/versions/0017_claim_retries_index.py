"""email_intent: pending retries indexed apart, so the claim takes them first without a sort

Revision ID: 0017
Revises: 0016
Create Date: 2026-12-02 10:00:00

"""

import sqlalchemy as sa
from alembic import op

# revision identifiers, used by Alembic.
revision = "0017"
down_revision = "0016"
branch_labels = None
depends_on = None

RETRY_DUE = sa.text("status = 'pending' AND attempt_count > 0")


def upgrade():
    op.create_index(
        "ix_email_intent_retry_due",
        "email_intent",
        ["lane", "next_attempt_at"],
        unique=False,
        postgresql_where=RETRY_DUE,
        sqlite_where=RETRY_DUE,
    )


def downgrade():
    op.drop_index("ix_email_intent_retry_due", table_name="email_intent")
