"""calibrations: reported against estimated counts, per session and per tenant's profile

Revision ID: 0009
Revises: 0008
Create Date: 2026-11-26
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0009"
down_revision: str | None = "0008"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table("compiles", schema=None) as batch_op:
        batch_op.add_column(sa.Column("estimate", sa.Integer(), nullable=True))
        batch_op.add_column(sa.Column("count_key", sa.String(length=255), nullable=True))
    op.create_table(
        "session_calibrations",
        sa.Column("session_pk", sa.String(length=36), nullable=False),
        sa.Column("key", sa.String(length=255), nullable=False),
        sa.Column("samples", sa.JSON(), nullable=False),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(
            ["session_pk"], ["sessions.pk"],
            name=op.f("fk_session_calibrations_session_pk_sessions"), ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("session_pk", "key", name=op.f("pk_session_calibrations")),
    )  # fmt: skip
    op.create_table(
        "profile_calibrations",
        sa.Column("tenant_id", sa.String(length=36), nullable=False),
        sa.Column("key", sa.String(length=255), nullable=False),
        sa.Column("samples", sa.JSON(), nullable=False),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(
            ["tenant_id"], ["tenants.id"],
            name=op.f("fk_profile_calibrations_tenant_id_tenants"), ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("tenant_id", "key", name=op.f("pk_profile_calibrations")),
    )  # fmt: skip


def downgrade() -> None:
    op.drop_table("profile_calibrations")
    op.drop_table("session_calibrations")
    with op.batch_alter_table("compiles", schema=None) as batch_op:
        batch_op.drop_column("count_key")
        batch_op.drop_column("estimate")
