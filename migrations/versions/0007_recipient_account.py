"""intents: the recipient's account in the application

Revision ID: 0007
Revises: 0006
Create Date: 2026-11-30 16:00:00

"""

# revision identifiers, used by Alembic.
revision = "0007"
down_revision = "0006"
branch_labels = None
depends_on = None


def upgrade():
    pass


def downgrade():
    pass
