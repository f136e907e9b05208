"""digests of the older part of a session's history, and the tool call ids they hold

Revision ID: 0007
Revises: 0006
Create Date: 2026-11-25
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0007"
down_revision: str | None = "0006"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    # Existing sessions need nothing more: a session's first compile reads it whole and writes
    # its digest.
    with op.batch_alter_table("sessions", schema=None) as batch_op:
        batch_op.add_column(
            sa.Column("history_version", sa.Integer(), server_default="0", nullable=False)
        )
    op.create_table(
        "digests",
        sa.Column("session_pk", sa.String(length=36), nullable=False),
        sa.Column("view_key", sa.String(length=64), nullable=False),
        sa.Column("generation", sa.String(length=36), nullable=False),
        sa.Column("upto", sa.BigInteger(), nullable=False),
        sa.Column("digest", sa.JSON(), nullable=False),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(
            ["session_pk"], ["sessions.pk"], name=op.f("fk_digests_session_pk_sessions"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("session_pk", "view_key", name=op.f("pk_digests")),
    )  # fmt: skip
    op.create_table(
        "digest_ids",
        sa.Column("session_pk", sa.String(length=36), nullable=False),
        sa.Column("view_key", sa.String(length=64), nullable=False),
        sa.Column("generation", sa.String(length=36), nullable=False),
        sa.Column("call_id", sa.String(length=600), nullable=False),
        sa.Column("kind", sa.String(length=8), nullable=False),
        sa.Column("upto", sa.BigInteger(), nullable=False),
        sa.ForeignKeyConstraint(
            ["session_pk"], ["sessions.pk"], name=op.f("fk_digest_ids_session_pk_sessions"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint(
            "session_pk", "view_key", "generation", "call_id", "kind", "upto",
            name=op.f("pk_digest_ids"),
        ),
    )  # fmt: skip


def downgrade() -> None:
    op.drop_table("digest_ids")
    op.drop_table("digests")
    with op.batch_alter_table("sessions", schema=None) as batch_op:
        batch_op.drop_column("history_version")
