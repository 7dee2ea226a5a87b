"""provider events: why an event waits unmatched

Revision ID: 0006
Revises: 0005
Create Date: 2026-11-30 16:00:00

"""

# revision identifiers, used by Alembic.
revision = "0006"
down_revision = "0005"
branch_labels = None
depends_on = None


def upgrade():
    pass


def downgrade():
    pass
