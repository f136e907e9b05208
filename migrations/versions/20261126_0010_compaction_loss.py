"""compaction loss: what a compaction's summary kept, merged, replaced and dropped

Revision ID: 0010
Revises: 0009
Create Date: 2026-11-26
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0010"
down_revision: str | None = "0009"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table("compactions", schema=None) as batch_op:
        batch_op.add_column(sa.Column("loss", sa.JSON(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("compactions", schema=None) as batch_op:
        batch_op.drop_column("loss")
