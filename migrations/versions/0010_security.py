"""console security: login failures, session generations

Revision ID: 0010
Revises: 0009
Create Date: 2026-11-30 17:00:00

"""

# revision identifiers, used by Alembic.
revision = "0010"
down_revision = "0009"
branch_labels = None
depends_on = None


def upgrade():
    pass


def downgrade():
    pass
