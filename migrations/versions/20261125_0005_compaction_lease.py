"""the compaction lease on sessions; event ids never reused on SQLite (AUTOINCREMENT)

Revision ID: 0005
Revises: 0004
Create Date: 2026-11-25
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0005"
down_revision: str | None = "0004"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table("sessions", schema=None) as batch_op:
        batch_op.add_column(sa.Column("compaction_holder", sa.String(length=64), nullable=True))
        batch_op.add_column(
            sa.Column("compaction_expires", sa.DateTime(timezone=True), nullable=True)
        )
        batch_op.add_column(sa.Column("compaction_start_event", sa.BigInteger(), nullable=True))
        batch_op.create_index(
            batch_op.f("ix_sessions_compaction_expires"), ["compaction_expires"], unique=False
        )
    if op.get_bind().dialect.name == "sqlite":
        # The table again, with AUTOINCREMENT: its rows keep their ids, and the highest id ever
        # handed out is remembered (sqlite_sequence) even when its row is deleted.
        with op.batch_alter_table(
            "events", recreate="always", table_kwargs={"sqlite_autoincrement": True}
        ):
            pass


def downgrade() -> None:
    if op.get_bind().dialect.name == "sqlite":
        with op.batch_alter_table(
            "events", recreate="always", table_kwargs={"sqlite_autoincrement": False}
        ):
            pass
    with op.batch_alter_table("sessions", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_sessions_compaction_expires"))
        batch_op.drop_column("compaction_start_event")
        batch_op.drop_column("compaction_expires")
        batch_op.drop_column("compaction_holder")
