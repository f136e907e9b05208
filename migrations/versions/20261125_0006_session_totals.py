"""running totals on sessions (message count, tokens per encoding), backfilled from messages

Revision ID: 0006
Revises: 0005
Create Date: 2026-11-25
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0006"
down_revision: str | None = "0005"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

TOTALS = ("message_count", "tokens_o200k", "tokens_cl100k")

# One pass over messages on Postgres; SQLite (UPDATE ... FROM only since 3.33) sums per session,
# along the messages' primary key.
BACKFILL_POSTGRES = """
UPDATE sessions SET message_count = t.n, tokens_o200k = t.o200k, tokens_cl100k = t.cl100k
FROM (SELECT session_pk, count(*) AS n, sum(tokens_o200k) AS o200k,
             sum(tokens_cl100k) AS cl100k
      FROM messages GROUP BY session_pk) AS t
WHERE sessions.pk = t.session_pk
"""
BACKFILL_SQLITE = """
UPDATE sessions SET
  message_count = (SELECT count(*) FROM messages m WHERE m.session_pk = sessions.pk),
  tokens_o200k = (SELECT coalesce(sum(m.tokens_o200k), 0) FROM messages m
                  WHERE m.session_pk = sessions.pk),
  tokens_cl100k = (SELECT coalesce(sum(m.tokens_cl100k), 0) FROM messages m
                   WHERE m.session_pk = sessions.pk)
"""


def upgrade() -> None:
    with op.batch_alter_table("sessions", schema=None) as batch_op:
        for name in TOTALS:
            batch_op.add_column(
                sa.Column(name, sa.BigInteger(), nullable=False, server_default="0")
            )
    postgres = op.get_bind().dialect.name == "postgresql"
    op.execute(BACKFILL_POSTGRES if postgres else BACKFILL_SQLITE)


def downgrade() -> None:
    with op.batch_alter_table("sessions", schema=None) as batch_op:
        for name in reversed(TOTALS):
            batch_op.drop_column(name)
