"""email_intent: the attempt count up to which an operator's requeue lets the worker retry

Revision ID: 0015
Revises: 0014
Create Date: 2026-12-01 13:00:00

"""

import sqlalchemy as sa
from alembic import op

# revision identifiers, used by Alembic.
revision = "0015"
down_revision = "0014"
branch_labels = None
depends_on = None


def upgrade():
    with op.batch_alter_table("email_intent") as batch:
        batch.add_column(sa.Column("attempts_granted", sa.Integer(), nullable=True))


def downgrade():
    with op.batch_alter_table("email_intent") as batch:
        batch.drop_column("attempts_granted")
