"""send loop: deferrals per recipient domain

Revision ID: 0009
Revises: 0008
Create Date: 2026-11-30 16:00:00

"""

# revision identifiers, used by Alembic.
revision = "0009"
down_revision = "0008"
branch_labels = None
depends_on = None


def upgrade():
    pass


def downgrade():
    pass
