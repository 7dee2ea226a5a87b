"""provider events: facts of send, reject and rendering failure

Revision ID: 0011
Revises: 0010
Create Date: 2026-11-30 17:00:00

"""

# revision identifiers, used by Alembic.
revision = "0011"
down_revision = "0010"
branch_labels = None
depends_on = None


def upgrade():
    pass


def downgrade():
    pass
