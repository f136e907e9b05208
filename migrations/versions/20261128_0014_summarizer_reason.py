"""compaction summariser reason: why the summariser a compaction's policy names did not write
its summary (fallback, summarizer_unavailable, nothing_to_summarize, not_summarized); the
records written before say it as their summariser did: none (``not_summarized``) or one that
fell back (``fallback``)

Revision ID: 0014
Revises: 0013
Create Date: 2026-11-28
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0014"
down_revision: str | None = "0013"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table("compactions", schema=None) as batch_op:
        batch_op.add_column(sa.Column("summarizer_reason", sa.String(length=32), nullable=True))
    op.execute(
        "UPDATE compactions SET summarizer_reason = 'not_summarized' WHERE summarizer IS NULL"
    )
    op.execute(
        "UPDATE compactions SET summarizer_reason = 'fallback' "
        "WHERE summarizer LIKE '%(fallback: %'"
    )


def downgrade() -> None:
    with op.batch_alter_table("compactions", schema=None) as batch_op:
        batch_op.drop_column("summarizer_reason")
