"""proxy_threads.root and .family: the conversations beside a session, found by their root
through an index instead of a scan of the session's siblings; filled from the metadata the
sidecar noted them in before (``ctxc_thread_root``, ``ctxc_thread_of``)

Revision ID: 0012
Revises: 0011
Create Date: 2026-11-28
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0012"
down_revision: str | None = "0011"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

BATCH = 1_000


def upgrade() -> None:
    with op.batch_alter_table("proxy_threads", schema=None) as batch_op:
        batch_op.add_column(sa.Column("root", sa.String(length=64), nullable=True))
        batch_op.add_column(sa.Column("family", sa.String(length=128), nullable=True))
        batch_op.create_index("ix_proxy_threads_family", ["family", "root"], unique=False)
    _fill()


def _fill() -> None:
    """Each thread's root and family from its session's metadata, in batches."""
    bind = op.get_bind()
    meta = sa.MetaData()
    threads = sa.Table("proxy_threads", meta, autoload_with=bind)
    sessions = sa.Table("sessions", meta, autoload_with=bind)
    query = (
        sa.select(threads.c.session_pk, sessions.c.metadata)
        .join(sessions, sessions.c.pk == threads.c.session_pk)
        .order_by(threads.c.session_pk)
        .limit(BATCH)
    )
    after = ""
    while rows := bind.execute(query.where(threads.c.session_pk > after)).all():
        for pk, noted in rows:
            noted = noted if isinstance(noted, dict) else {}
            root, family = noted.get("ctxc_thread_root"), noted.get("ctxc_thread_of")
            if root is not None or family is not None:
                bind.execute(
                    threads.update()
                    .where(threads.c.session_pk == pk)
                    .values(root=root, family=family)
                )
        after = rows[-1][0]


def downgrade() -> None:
    with op.batch_alter_table("proxy_threads", schema=None) as batch_op:
        batch_op.drop_index("ix_proxy_threads_family")
        batch_op.drop_column("family")
        batch_op.drop_column("root")
