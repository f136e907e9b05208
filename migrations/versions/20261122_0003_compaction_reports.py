"""when a compile's outcome was reported; which summariser wrote a compaction's summary

Revision ID: 0003
Revises: 0002
Create Date: 2026-11-22
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0003"
down_revision: str | None = "0002"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table("compiles", schema=None) as batch_op:
        batch_op.add_column(sa.Column("reported_at", sa.DateTime(timezone=True), nullable=True))
    with op.batch_alter_table("compactions", schema=None) as batch_op:
        batch_op.add_column(sa.Column("summarizer", sa.String(length=128), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("compactions", schema=None) as batch_op:
        batch_op.drop_column("summarizer")
    with op.batch_alter_table("compiles", schema=None) as batch_op:
        batch_op.drop_column("reported_at")
