"""intents: a version that changes on every write

Revision ID: 0008
Revises: 0007
Create Date: 2026-11-30 16:00:00

"""

# revision identifiers, used by Alembic.
revision = "0008"
down_revision = "0007"
branch_labels = None
depends_on = None


def upgrade():
    pass


def downgrade():
    pass
