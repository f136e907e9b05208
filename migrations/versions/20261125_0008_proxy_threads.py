"""proxy threads: what the sidecar knows of the history an agent resends

Revision ID: 0008
Revises: 0007
Create Date: 2026-11-25
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0008"
down_revision: str | None = "0007"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "proxy_threads",
        sa.Column("session_pk", sa.String(length=36), nullable=False),
        sa.Column("format", sa.String(length=16), nullable=False),
        sa.Column("sent", sa.BigInteger(), nullable=False),
        sa.Column("chain", sa.String(length=64), nullable=False),
        sa.Column("raw", sa.String(length=32), nullable=False),
        sa.Column("replies", sa.Integer(), nullable=False),
        sa.Column("reply", sa.String(length=64), nullable=False),
        sa.Column("turns", sa.BigInteger(), nullable=False),
        sa.Column("forks", sa.Integer(), nullable=False),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(
            ["session_pk"], ["sessions.pk"], name=op.f("fk_proxy_threads_session_pk_sessions"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("session_pk", name=op.f("pk_proxy_threads")),
    )  # fmt: skip


def downgrade() -> None:
    op.drop_table("proxy_threads")
