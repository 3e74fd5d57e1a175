"""A stand-in for the Qdrant *server* in tests: Qdrant's REST API over qdrant-client's local mode.

No Qdrant server binary can be installed on this machine (no Debian or PyPI package, no
Docker engine), and an embedded store opens its folder in one process only, so a worker, a
CLI and the test itself could not share one. This process serves the subset of the REST API
that ``indexer.store.QdrantClientStore`` uses (collections, payload index, upsert, update
vectors, delete, query, count, retrieve, scroll) by handing each request to a
``QdrantClient(":memory:")``, one request at a time (a lock, like a server's per-collection
update queue), so several processes talk to one store over HTTP exactly as they would to
Qdrant. It is a test double of the server, not the server: HNSW, persistence, shards and
replicas are not modelled; the client code path (HTTP, JSON models, errors) is the real one.

Run: ``python -m tests.worker.qdrant_standin --port 6333``.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import re
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import urlsplit

from pydantic import BaseModel
from qdrant_client import QdrantClient
from qdrant_client.http import models as m

from tests.app.web_stub import serving

_CLIENT = QdrantClient(location=":memory:")
_LOCK = threading.Lock()
_ROUTE = re.compile(r"^/collections(?:/(?P<name>[^/]+))?(?P<rest>/.*)?$")


def _json(value: Any) -> Any:
    if isinstance(value, BaseModel):
        return value.model_dump(mode="json")
    if isinstance(value, list | tuple):
        return [_json(v) for v in value]
    return value


def _update_result() -> dict[str, Any]:
    return {"operation_id": 0, "status": "completed"}


def handle(method: str, path: str, body: dict[str, Any]) -> tuple[int, Any]:
    """One REST call -> (status, result)."""
    if path in ("/", ""):
        return 200, {"title": "qdrant - vector search engine (test stand-in)", "version": "1.15.0"}
    match = _ROUTE.match(path)
    if not match:
        return 404, f"no route {method} {path}"
    name, rest = match.group("name"), match.group("rest") or ""
    c = _CLIENT
    if name is None:
        return 200, {"collections": [{"name": d.name} for d in c.get_collections().collections]}
    if rest == "/exists":
        return 200, {"exists": c.collection_exists(name)}
    if rest == "" and method == "GET":
        if not c.collection_exists(name):
            return 404, f"Not found: Collection `{name}` doesn't exist!"
        return 200, _json(c.get_collection(name))
    if rest == "" and method == "PUT":
        if c.collection_exists(name):
            return 409, f"Wrong input: Collection `{name}` already exists!"
        spec = m.CreateCollection.model_validate(body)
        c.create_collection(name, vectors_config=spec.vectors,
                            sparse_vectors_config=spec.sparse_vectors)
        return 200, True
    if rest == "" and method == "DELETE":
        return 200, c.delete_collection(name)
    if not c.collection_exists(name):
        return 404, f"Not found: Collection `{name}` doesn't exist!"
    if rest == "/index":
        return 200, _update_result()  # local mode has no payload indexes
    if rest == "/points" and method == "PUT":
        points = m.PointsList.model_validate(body).points
        c.upsert(name, points=points)
        return 200, _update_result()
    if rest == "/points/vectors" and method == "PUT":
        c.update_vectors(name, points=m.UpdateVectors.model_validate(body).points)
        return 200, _update_result()
    if rest == "/points/delete":
        selector: Any = (m.PointIdsList.model_validate(body) if "points" in body
                         else m.FilterSelector.model_validate(body))
        c.delete(name, points_selector=selector)
        return 200, _update_result()
    if rest == "/points/query":
        q = m.QueryRequest.model_validate(body)
        query = q.query.nearest if isinstance(q.query, m.NearestQuery) else q.query
        response = c.query_points(name, query=query, using=q.using, prefetch=q.prefetch,
                                  query_filter=q.filter, limit=q.limit or 10,
                                  with_payload=q.with_payload or True,
                                  score_threshold=q.score_threshold)
        return 200, _json(response)
    if rest == "/points/count":
        r = m.CountRequest.model_validate(body)
        return 200, _json(c.count(name, count_filter=r.filter, exact=bool(r.exact)))
    if rest == "/points" and method == "POST":
        r = m.PointRequest.model_validate(body)
        return 200, _json(c.retrieve(name, ids=r.ids, with_payload=r.with_payload or True,
                                     with_vectors=r.with_vector or False))
    if rest == "/points/scroll":
        r = m.ScrollRequest.model_validate(body)
        records, offset = c.scroll(name, scroll_filter=r.filter, limit=r.limit or 10,
                                   offset=r.offset, with_payload=r.with_payload or True)
        return 200, {"points": _json(records), "next_page_offset": offset}
    return 404, f"no route {method} {path}"


class _Server(ThreadingHTTPServer):
    # socketserver listens with a backlog of 5. Twenty search threads and a worker opening
    # connections at once overflow it while the accept loop waits for the GIL (a loaded
    # machine), and the kernel resets some of them: test_twenty_concurrent_searches failed
    # with "connection reset" that way under xdist. Qdrant's server (actix) listens with 2048.
    request_queue_size = 1024
    daemon_threads = True


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def _serve(self) -> None:
        started = time.perf_counter()
        length = int(self.headers.get("content-length") or 0)
        raw = self.rfile.read(length) if length else b""
        try:
            body = json.loads(raw) if raw else {}
            with _LOCK:
                status, result = handle(self.command, urlsplit(self.path).path, body)
        except Exception as e:  # a bad request: say so like Qdrant does
            status, result = 400, f"Bad request: {type(e).__name__}: {e}"
        elapsed = time.perf_counter() - started
        payload = ({"result": result, "status": "ok", "time": elapsed} if status == 200 else
                   {"status": {"error": str(result)}, "time": elapsed})
        data = json.dumps(payload).encode()
        self.send_response(status)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    do_GET = do_PUT = do_POST = do_DELETE = do_PATCH = _serve

    def log_message(self, *args: Any) -> None:  # quiet
        pass


@contextlib.contextmanager
def in_process(handler: type[_Handler] | None = None) -> Iterator[str]:
    """The stand-in served from a thread of this process on a free port: its URL (the engine
    is this process's one, ``_CLIENT``; a test patching ``handle`` sees its requests). A
    ``handler`` subclass changes how it answers (drops connections, one request per
    connection); the server is gone once the block ends."""
    with serving(handler or _Handler, _Server) as url:
        yield url


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=6333)
    args = parser.parse_args()
    server = _Server((args.host, args.port), _Handler)
    print(f"qdrant stand-in on http://{args.host}:{args.port}", flush=True)
    server.serve_forever()


if __name__ == "__main__":
    main()
