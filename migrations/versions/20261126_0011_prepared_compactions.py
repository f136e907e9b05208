"""prepared_compactions: summaries made in the background, waiting to be swapped in; and on the
compaction record, when it was prepared and the cache economics it was weighed by

Revision ID: 0011
Revises: 0010
Create Date: 2026-11-26
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0011"
down_revision: str | None = "0010"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "prepared_compactions",
        sa.Column("session_pk", sa.String(length=36), nullable=False),
        sa.Column("seqs", sa.JSON(), nullable=False),
        sa.Column("digest", sa.String(length=64), nullable=False),
        sa.Column("summary", sa.JSON(), nullable=False),
        sa.Column("prepared_at", sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(
            ["session_pk"], ["sessions.pk"],
            name=op.f("fk_prepared_compactions_session_pk_sessions"), ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("session_pk", name=op.f("pk_prepared_compactions")),
    )  # fmt: skip
    with op.batch_alter_table("compactions", schema=None) as batch_op:
        batch_op.add_column(sa.Column("prepared_at", sa.DateTime(timezone=True), nullable=True))
        batch_op.add_column(sa.Column("economics", sa.JSON(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("compactions", schema=None) as batch_op:
        batch_op.drop_column("economics")
        batch_op.drop_column("prepared_at")
    op.drop_table("prepared_compactions")
