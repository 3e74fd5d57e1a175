"""A plain web server on a free port, in a thread: it stands for a server at the configured URL
that is not the one Facet expects (a web server where Qdrant or `facet serve` should be), so
that tests can check it is named as such."""

from __future__ import annotations

import contextlib
import http.server
import threading
from collections.abc import Iterator
from typing import Any


class QuietHandler(http.server.SimpleHTTPRequestHandler):
    """``python -m http.server``'s handler (a POST is 501 with an HTML page), without its log."""

    def log_message(self, *args: object) -> None:
        pass


@contextlib.contextmanager
def serving(handler: Any, server_class: type[http.server.ThreadingHTTPServer] = http.server.ThreadingHTTPServer,
            ) -> Iterator[str]:
    """Serve ``handler`` (a request handler class, or a partial of one) on 127.0.0.1 and a free
    port until the block ends, by ``server_class``; yields the base URL."""
    server = server_class(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()
