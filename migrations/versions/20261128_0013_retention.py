"""Retention: the indexes that make expiring idempotency keys and old compile records, and the
read of a session's last reported compile, bounded reads: idempotency keys by age across
tenants (the per-tenant age index goes: nothing reads by it any more), compiles by age and by
report

Revision ID: 0013
Revises: 0012
Create Date: 2026-11-28
"""

from collections.abc import Sequence

from alembic import op

revision: str = "0013"
down_revision: str | None = "0012"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table("idempotency_keys", schema=None) as batch_op:
        batch_op.drop_index("ix_idempotency_keys_age")
        batch_op.create_index("ix_idempotency_keys_created", ["created_at"], unique=False)
    with op.batch_alter_table("compiles", schema=None) as batch_op:
        batch_op.create_index("ix_compiles_reported", ["session_pk", "reported_at"], unique=False)
        batch_op.create_index("ix_compiles_created", ["created_at", "id"], unique=False)


def downgrade() -> None:
    with op.batch_alter_table("compiles", schema=None) as batch_op:
        batch_op.drop_index("ix_compiles_created")
        batch_op.drop_index("ix_compiles_reported")
    with op.batch_alter_table("idempotency_keys", schema=None) as batch_op:
        batch_op.drop_index("ix_idempotency_keys_created")
        batch_op.create_index("ix_idempotency_keys_age", ["tenant_id", "created_at"], unique=False)
