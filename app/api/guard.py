"""What a server without a login refuses before any route: a ``Host`` it does not answer to, and a
browser's write from a page of another site.

``facet serve`` without ``FACET_API_KEY`` (the API and the UI it mounts at /ui), and ``facet ui``
on its own without a login (``FACET_UI_AUTH``, else the API key), are reachable by any page the
user's browser opens: the page can point a name of its own at the server (DNS rebinding) and then
send it same-origin requests, and it can post forms and multipart uploads to it cross-site
without a preflight. The security exploration of the sixth session of 2026-12-02 indexed and read
back a file through the first, cancelled jobs and pushed files into the UI through the second;
the exploration's left-alone list of that session found ``facet ui`` on its own unguarded (a
rebinding page read its whole config and uploaded files into it).
"""

from __future__ import annotations

import ipaddress
from collections.abc import Iterable
from dataclasses import dataclass
from urllib.parse import urlsplit

from starlette.requests import Request
from starlette.types import ASGIApp, Receive, Scope, Send

from app.api import errors
from app.settings import FacetSettings


@dataclass(frozen=True)
class Unguarded:
    """What a guard says of the server it stands before: why it guards (``lacks``: "this server
    has no FACET_API_KEY"), what would let any name and page in (``remedy``: "set
    FACET_API_KEY"), and whether a login makes the guard step aside (``login``)."""

    lacks: str
    remedy: str
    login: bool = False
    # Where the login is a cookie (Gradio's), which a browser sends with any page's request:
    # under this path a page of another site's writes stay refused with a login too ("": every
    # path; None: none).
    cookie_paths: str | None = None


API = Unguarded("this server has no FACET_API_KEY", "set FACET_API_KEY")


def cross_site(request: Request, settings: FacetSettings, *, login: bool | None = None) -> str | None:
    """The ``Origin`` of a browser's request from another site than this server, where neither
    a login (``login``; default: an API key) nor ``FACET_CORS_ORIGINS`` lets that site in; else
    None. A multipart form POST is a "simple" request a browser sends cross-site without asking
    first (no preflight), so any page a user of a keyless server opened could upload files into
    it: CORS only hid the answer. A request without ``Origin`` (curl, httpx, a server-side
    client) is not a browser's cross-site request. The origin's host and port are compared with
    the ``Host`` header, not its scheme (behind a TLS proxy the server sees http for a page of
    https)."""
    origin = request.headers.get("origin")
    if origin is None or (bool(settings.api_key) if login is None else login):
        return None
    if origin in settings.cors_origins or "*" in settings.cors_origins:
        return None
    netloc = urlsplit(origin).netloc.lower()
    if netloc == request.headers.get("host", "").lower():
        return None
    # Behind a proxy that passes its own upstream as Host (nginx's default, 127.0.0.1:8000) and
    # the client's in X-Forwarded-Host, the page's own origin read as another site: every UI
    # write was refused. A page of another site cannot send that header cross-site without a
    # preflight, which CORS refuses, so it does not open the door to one.
    forwarded = request.headers.get("x-forwarded-host", "")
    if forwarded and netloc == forwarded.split(",")[0].strip().lower():
        return None
    return origin


def untrusted_host(host_header: str, settings: FacetSettings, *, login: bool | None = None,
                   also: Iterable[str] = ()) -> str | None:
    """The host name of a request to a server without a login (``login``; default: an API key)
    that is neither an IP address, ``localhost``, a name of ``FACET_API_ALLOWED_HOSTS`` nor one of
    ``also`` (the name a server was told to listen on); else None. A page of another site can
    point a name of its own at this server (DNS rebinding) and then send it same-origin
    requests, which neither the cross-site check nor CORS stops."""
    if (bool(settings.api_key) if login is None else login) or "*" in settings.api_allowed_hosts:
        return None
    host = host_header.strip().lower()
    if host.startswith("["):  # [::1]:8000
        name = host[1:].split("]", 1)[0]
    else:  # name:port, or a bare IPv6 address (no port)
        name = host.rsplit(":", 1)[0] if host.count(":") == 1 else host
    if not name:  # no Host at all (HTTP/1.0, a raw ASGI call): no browser's request
        return None
    # A fully qualified name's root dot (``localhost.``, ``facet.example.org.``) names the same
    # host: it was refused where the name without it was allowed.
    given, name = name, name.removesuffix(".")
    try:
        ipaddress.ip_address(name)
        return None
    except ValueError:
        pass
    if name == "localhost" or name.endswith(".localhost"):
        return None
    if name in {h.strip().lower().removesuffix(".") for h in (*settings.api_allowed_hosts, *also)}:
        return None
    return given


class KeylessGuard:
    """Before every route of a server without a login: a request whose ``Host`` names it by a
    name not allowed (``untrusted_host``) is refused (400), and so is a browser's request that
    changes something from a page of another site (``cross_site``: 403).

    Args:
        settings: ``FACET_API_ALLOWED_HOSTS``, ``FACET_CORS_ORIGINS``, the API key.
        unguarded: what the refusals say (default: the API's, which a key turns off); ``facet ui``
            on its own passes its own, with whether it has a login.
        also: host names answered besides those of ``FACET_API_ALLOWED_HOSTS`` (``facet ui
            --host NAME``: Gradio checks its start through that name).
    """

    def __init__(self, app: ASGIApp, settings: FacetSettings, unguarded: Unguarded | None = None,
                 also: Iterable[str] = ()) -> None:
        self.app = app
        self.settings = settings
        self.unguarded = unguarded or Unguarded(API.lacks, API.remedy, login=bool(settings.api_key),
                                                cookie_paths="/ui")
        self.also = tuple(also)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        said = self.unguarded
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        if said.login:
            await self._behind_a_login(scope, receive, send)
            return
        request = Request(scope)
        if (name := untrusted_host(request.headers.get("host", ""), self.settings, login=False,
                                   also=self.also)) is not None:
            status, kind, code = 400, "invalid_request_error", "untrusted_host"
            message = (f"host {name!r} is refused: {said.lacks}, so it answers only its IP "
                       "addresses, localhost and the names FACET_API_ALLOWED_HOSTS lists (a page "
                       f"of another site could reach it through a name of its own); {said.remedy}, "
                       "or list the name in FACET_API_ALLOWED_HOSTS")
        elif scope["method"] not in ("GET", "HEAD", "OPTIONS") and \
                (origin := cross_site(request, self.settings, login=False)) is not None:
            status, kind, code = 403, "permission_error", "cross_site_request"
            what = "an upload" if str(scope.get("path", "")).endswith("/uploads") else "a request"
            message = (f"{what} from a page of another site ({origin}) is refused: {said.lacks}, "
                       "so any page a browser opened could write into it; "
                       f"{said.remedy}, or list that site in FACET_CORS_ORIGINS")
        else:
            await self.app(scope, receive, send)
            return
        errors.log_answer(request, status, errors.cut_names(message), code)  # (as the body says it)
        await errors.error_response(status, message, kind, code=code)(scope, receive, send)

    async def _behind_a_login(self, scope: Scope, receive: Receive, send: Send) -> None:
        """With a login, names are the login's to answer; but where it is a cookie (the UI's),
        a page of another site's write carries it: it was let through (the verification round
        of 2026-12-03 uploaded a file into a logged-in UI from another origin)."""
        cookie = self.unguarded.cookie_paths
        path = str(scope.get("path", ""))
        root = str(scope.get("root_path", ""))
        path = path[len(root):] if root and path.startswith(root) else path
        # Gradio logs out on a GET, and ends every session of the user: an <img> of another
        # site's page did it (the security review of the seventh session of 2026-12-06). A
        # browser sends no Origin with such a GET, but says where it came from (Sec-Fetch-Site).
        logout = cookie is not None and scope["method"] in ("GET", "HEAD") and \
            path == f"{cookie}/logout"
        if cookie is None or (scope["method"] in ("GET", "HEAD", "OPTIONS") and not logout) or \
                (cookie and path != cookie and not path.startswith(cookie + "/")):
            await self.app(scope, receive, send)
            return
        request = Request(scope)
        origin = cross_site(request, self.settings, login=False)
        if origin is None and logout and \
                request.headers.get("sec-fetch-site", "").lower() in ("cross-site", "same-site"):
            origin = "another site"
        if origin is None:
            await self.app(scope, receive, send)
            return
        if logout and origin == "another site":  # (told by Sec-Fetch-Site: no list lets it in)
            message = ("a logout from a page of another site is refused: the page's login is a "
                       "cookie, which a browser sends with any page's request, and a logout ends "
                       "every session of the user; log out from the page itself")
        else:
            message = (f"a request from a page of another site ({origin}) is refused: the page's "
                       "login is a cookie, which a browser sends with any page's request; list "
                       "that site in FACET_CORS_ORIGINS")
        errors.log_answer(request, 403, errors.cut_names(message), "cross_site_request")
        await errors.error_response(403, message, "permission_error",
                                    code="cross_site_request")(scope, receive, send)
