"""The provider wire formats of ctxc's sidecar proxy: pure, with no I/O.

Upstream answers (whole, or streamed as server-sent events) read into the assistant's reply and
its usage; the upstream's "prompt too long" recognised; ctxc's own errors written in each
provider's error shape.
"""

from app.domain.wire.errors import error_body, fitting_share, is_overflow
from app.domain.wire.reply import Provider, Reply, WireError
from app.domain.wire.stream import ReplyStream, reply_of

__all__ = [
    "Provider",
    "Reply",
    "ReplyStream",
    "WireError",
    "error_body",
    "fitting_share",
    "is_overflow",
    "reply_of",
]
