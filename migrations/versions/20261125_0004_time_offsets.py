"""the UTC offset a session's and a message's times came with (an import keeps it)

Revision ID: 0004
Revises: 0003
Create Date: 2026-11-25
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0004"
down_revision: str | None = "0003"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def _offset(name: str) -> sa.Column[int]:
    return sa.Column(name, sa.Integer(), nullable=False, server_default="0")


def upgrade() -> None:
    with op.batch_alter_table("sessions", schema=None) as batch_op:
        batch_op.add_column(_offset("created_offset"))
        batch_op.add_column(_offset("updated_offset"))
    with op.batch_alter_table("messages", schema=None) as batch_op:
        batch_op.add_column(_offset("created_offset"))


def downgrade() -> None:
    with op.batch_alter_table("messages", schema=None) as batch_op:
        batch_op.drop_column("created_offset")
    with op.batch_alter_table("sessions", schema=None) as batch_op:
        batch_op.drop_column("updated_offset")
        batch_op.drop_column("created_offset")
