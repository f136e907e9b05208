"""The sidecar's turn: an agent's provider request in, the managed request forwarded, the
upstream's answer back.

An agent's SDK points its ``base_url`` at ctxc (``/openai/v1``: Chat Completions and
Responses; ``/anthropic``: Messages; ``/gemini``: Gemini's ``generateContent``) and sends what
it would send to the provider. With ``X-Ctxc-Session`` the turn is managed in that session
(app/services/sidecar): the new part of the resent history is compiled with the stored one for
the model's window (the session's compiler and compaction policy), the compiled messages replace
the request's, and once the upstream answered (streamed through as it arrives) the new
messages, the reply and its usage are stored together. Without the header the request is
compiled statelessly: repaired and
fitted, nothing stored.

Everything the agent gets keeps the provider's shapes: the upstream's answers and errors as they
came, ctxc's own errors in the provider's error JSON (``error_body``); what ctxc adds travels in
``X-Ctxc-*`` answer headers. ``X-Ctxc-Managed`` says whether ctxc managed the request: ``false``
(with ``X-Ctxc-Unmanaged-Reason``) on every answer it passed on as it was, the other calls of
the provider's API and a Responses request continuing a ``previous_response_id``
(app/api/sidecar/responses.py). An upstream "prompt too long" runs the session's compaction (a
full one when it has no policy) and retries once, on a budget shrunk by what the upstream said.
"""

from app.api.sidecar.handling import forward, handle
from app.api.sidecar.requests import ANTHROPIC, GEMINI, OPENAI, RESPONSES, Call

__all__ = ["ANTHROPIC", "GEMINI", "OPENAI", "RESPONSES", "Call", "forward", "handle"]
