"""intents: the recipient's account in the application

An intent may name the account of its recipient in the application
(``reviewer:29``), so a notice can be traced to a person, not only to an
address that may change.

Revision ID: 0007
Revises: 0006
Create Date: 2026-11-30 16:00:00

"""

import sqlalchemy as sa
from alembic import op

# revision identifiers, used by Alembic.
revision = "0007"
down_revision = "0006"
branch_labels = None
depends_on = None


def upgrade():
    with op.batch_alter_table("email_intent", schema=None) as batch_op:
        batch_op.add_column(sa.Column("recipient_account", sa.String(length=255), nullable=True))


def downgrade():
    with op.batch_alter_table("email_intent", schema=None) as batch_op:
        batch_op.drop_column("recipient_account")
