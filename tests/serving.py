"""A Starlette app served by uvicorn on a loopback port, in a thread of the test process: what
the local provider stubs run on."""

from __future__ import annotations

import socket
import threading
import time

import uvicorn
from starlette.applications import Starlette


class Serving:
    """Serves ``app`` while inside the ``with``; the port is bound from the start (``url``)."""

    def __init__(self, app: Starlette, name: str) -> None:
        self.name = name
        self._socket = socket.socket()
        self._socket.bind(("127.0.0.1", 0))
        self.url = f"http://127.0.0.1:{self._socket.getsockname()[1]}"
        # log_config=None leaves the process's logging as it is; a stream still open at exit is
        # cut after a second rather than awaited.
        config = uvicorn.Config(
            app,
            log_config=None,
            log_level=None,
            access_log=False,
            lifespan="off",
            timeout_graceful_shutdown=1,
        )
        self._server = uvicorn.Server(config)
        self._thread = threading.Thread(target=self._server.run, args=([self._socket],))
        self._thread.daemon = True

    def __enter__(self) -> Serving:
        self._thread.start()
        deadline = time.monotonic() + 30
        while not self._server.started:
            if not self._thread.is_alive() or time.monotonic() > deadline:
                raise RuntimeError(f"{self.name} did not start")
            time.sleep(0.01)
        return self

    def __exit__(self, *_: object) -> None:
        self._server.should_exit = True
        self._thread.join(timeout=30)
        self._socket.close()
