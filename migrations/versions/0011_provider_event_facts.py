"""provider events: facts of send, reject and rendering failure

Intents keep two more facts a provider reports: the first delay (``delayed_at``,
``delay_reason``) and that the provider will never send the message
(``rejected_at``, ``reject_reason``: SES Reject, Rendering Failure, the
account-level suppression list...), in columns retention does not clear. An
event keeps the provider's finer kind (``subtype``: bounce subtype, feedback
type). A partial index holds the reports about an endpoint's set-up (an SNS
topic unsubscribed, inbound mail at the events endpoint) for their alerts.

Revision ID: 0011
Revises: 0010
Create Date: 2026-11-30 17:00:00

"""

import sqlalchemy as sa
from alembic import op

# revision identifiers, used by Alembic.
revision = "0011"
down_revision = "0010"
branch_labels = None
depends_on = None

SET_UP_EVENTS = sa.text("event_type IN ('topic_unsubscribed', 'inbound_mail')")


def upgrade():
    with op.batch_alter_table("email_intent", schema=None) as batch_op:
        batch_op.add_column(sa.Column("delayed_at", sa.DateTime(timezone=True), nullable=True))
        batch_op.add_column(sa.Column("delay_reason", sa.Text(), nullable=True))
        batch_op.add_column(sa.Column("rejected_at", sa.DateTime(timezone=True), nullable=True))
        batch_op.add_column(sa.Column("reject_reason", sa.Text(), nullable=True))
    with op.batch_alter_table("provider_event", schema=None) as batch_op:
        batch_op.add_column(sa.Column("subtype", sa.String(length=50), nullable=True))
        batch_op.create_index(
            "ix_provider_event_set_up",
            ["event_type", "received_at"],
            unique=False,
            postgresql_where=SET_UP_EVENTS,
            sqlite_where=SET_UP_EVENTS,
        )


def downgrade():
    with op.batch_alter_table("provider_event", schema=None) as batch_op:
        batch_op.drop_index(
            "ix_provider_event_set_up", postgresql_where=SET_UP_EVENTS, sqlite_where=SET_UP_EVENTS
        )
        batch_op.drop_column("subtype")
    with op.batch_alter_table("email_intent", schema=None) as batch_op:
        batch_op.drop_column("reject_reason")
        batch_op.drop_column("rejected_at")
        batch_op.drop_column("delay_reason")
        batch_op.drop_column("delayed_at")
