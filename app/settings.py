"""All runtime settings, read from ``FACET_*`` environment variables in one place.

This is the only module of the application that reads ``FACET_*`` variables; everything else
receives settings (or the values it needs) as arguments (``OTHER_VARIABLES`` lists the few read
elsewhere, ``warn_unknown_variables`` names any other). One exception, below the application:
``embedders.backbone`` reads ``FACET_DTYPE`` (the decoders' precision: ``float32``, ``bfloat16``,
``float16``; default bfloat16 on CUDA, float32 on CPU; encoders such as minilm always run
float32), so that scripts which load models without the CLI honour it too; ``dtype`` below
checks it when a command starts.

One rule for every variable: surrounding whitespace is ignored (systemd's ``Environment=``,
``.env`` files and compose files keep it: ``FACET_DATA_DIR=" /srv/data"`` made a folder named
" " in the working directory), and an empty value is unset, the default (``FACET_INDEX_THREADS=``
was an error while ``FACET_DEVICE=`` meant automatic), but for the folders and
``FACET_API_ALLOWED_ROOTS`` (whose default is any path), which refuse it (``_folder``,
``_roots``). Choice settings (``FACET_DEVICE``, ``FACET_DTYPE``, ``FACET_VECTOR_BACKEND``) are
read in any case; a bad value stops every command with one line naming the variable and what
it takes (``get_settings``).
"""

from __future__ import annotations

import difflib
import inspect
import logging
import os
import re
from collections.abc import Mapping
from functools import lru_cache
from pathlib import Path
from typing import Any

from pydantic import Field, ValidationError, ValidationInfo, field_validator, model_validator
from pydantic.fields import FieldInfo
from pydantic_settings import (
    BaseSettings,
    EnvSettingsSource,
    PydanticBaseSettingsSource,
    SettingsConfigDict,
    SettingsError,
)

from app.errors import InvalidRequestError

logger = logging.getLogger(__name__)

# What ``embedders.backbone.pick_device`` and ``torch.device`` take (not imported here: torch
# would slow every command's start); anything else was a traceback when the first model loaded.
_DEVICE = re.compile(r"(cpu|cuda|mps|xpu)(:\d+)?")
DEVICE_CHOICES = ("use cpu, cuda, cuda:N (the GPU's number), mps or xpu; unset for automatic (cuda "
                  "when a GPU is present, else cpu)")


def device_refused(value: str) -> bool:
    """Whether ``value`` (lower case) is no device torch reads (``FACET_DEVICE``'s rule, which a
    command's ``--device`` follows: `facet train --device bogus` was a traceback)."""
    return not _DEVICE.fullmatch(value)
# A database URL's scheme, as SQLAlchemy's ``make_url`` reads it (``dialect+driver://``).
_DATABASE_SCHEME = re.compile(r"([\w+]+)://")
# The names ``embedders.backbone`` maps to torch dtypes (a test keeps the two the same).
DTYPE_NAMES = ("float32", "fp32", "bfloat16", "bf16", "float16", "fp16")
# ``indexer.store.open_store``'s backends (checked at start: a typo was found at the first open).
VECTOR_BACKENDS = ("edge", "local", "server")
# The folder settings: an empty value is refused, not the default (``FacetSettings._folder``).
_FOLDERS = ("data_dir", "model_cache_dir", "checkpoint_dir", "shared_data_dir")
# The folders a relative value is warned about (``_folder``): one place every command should
# share. The shared datasets' default is relative on purpose (``../shared/data`` of a checkout).
_FOLDERS_OF_ONE_PLACE = ("data_dir", "model_cache_dir", "checkpoint_dir")
_warned_relative: set[tuple[str, str]] = set()  # once per process and value
# Settings whose default opens the most (any path for POST /jobs): an empty value is refused as
# the folders' is (``FacetSettings._roots``), not read as the default: a compose file's unset
# ``${ROOTS}`` opened every path the server can read.
_EMPTY_REFUSED = (*_FOLDERS, "api_allowed_roots")
# The Qdrant server's collection layout (``FacetSettings.qdrant_layout``).
_QDRANT_LAYOUT = ("qdrant_shards", "qdrant_replication_factor", "qdrant_write_consistency")
_warned_layout = False  # the layout set beside a store that ignores it: said once per process
# ``indexer.chunking``'s limits, repeated: importing the indexer package loads the vector store.
DEFAULT_CHUNK_OVERLAP = 32
MAX_CHUNK_TOKENS = 2**31 - 1
# Longer waits and leases are typing mistakes, and overflowed datetime and thread timeouts.
_YEAR_S = 365 * 24 * 3600
# The FACET_* variables read elsewhere than through ``FacetSettings`` (whose fields are known
# by their names): any other FACET_* variable is warned about (``warn_unknown_variables``), as
# a misspelt FACET_APIKEY left a server open to everyone without a word. Add a name here when
# code starts reading one. Found by grepping the project for ``FACET_[A-Z_]+``:
# ``embedders.registry`` (FACET_PLUGINS); docker compose, from the same shell, for
# docker-compose.yml (FACET_PUBLISH_HOST, FACET_QDRANT_PUBLISH_HOST, FACET_SOURCES);
# scripts/gpu/device.sh (FACET_GPU_WORK). FACET_DTYPE (read by ``embedders.backbone``) is a
# field as well.
OTHER_VARIABLES = ("FACET_PLUGINS", "FACET_PUBLISH_HOST", "FACET_QDRANT_PUBLISH_HOST",
                   "FACET_SOURCES", "FACET_GPU_WORK")


def _expanded(path: Path, item: int | None = None) -> Path:
    """``path`` with ``~`` / ``~user`` expanded; one that cannot be (no such user, no home
    folder) refused in the settings' one line, not a RuntimeError traceback at every command's
    start (``FACET_DATA_DIR='~nosuchuser/x'``)."""
    try:
        return path.expanduser()
    except RuntimeError:
        head = path.parts[0] if path.parts else str(path)
        where = f"item {item} " if item is not None else ""
        raise ValueError(f"{where}starts with {head!r}, which cannot be expanded (no such user, "
                         "or no home folder): give the folder's full path") from None


# The most torch threads FACET_QUERY_THREADS / FACET_INDEX_THREADS take: 100000 (a typo) was a
# segfault of `facet embed`, a Rust panic at `facet serve`'s start and a job that failed in its
# worker with a traceback, 2**31 "Overflow when unpacking long" (the settings review of the
# sixth session of 2026-12-06). No machine Facet runs on has more cores than this.
MAX_THREADS = 1024


def _default_data_dir() -> Path:
    return Path.home() / ".local" / "share" / "facet"


class _Environment(EnvSettingsSource):
    """The ``FACET_*`` variables, a blank one not decoded as JSON: ``FACET_UI_RERANKERS=`` was
    "cannot be read" where every other empty setting is unset (``FacetSettings._trimmed``)."""

    def prepare_field_value(self, field_name: str, field: FieldInfo, value: Any,
                            value_is_complex: bool) -> Any:
        if isinstance(value, str) and not value.strip():
            return value
        return super().prepare_field_value(field_name, field, value, value_is_complex)


class UnknownSettingError(InvalidRequestError, ValueError):
    """A keyword argument of ``FacetSettings(...)`` that is no setting (a ``ValueError`` too,
    as pydantic's refusal of a bad value is)."""


class InvalidSettingError(InvalidRequestError, ValueError):
    """A setting whose value is refused, from ``FacetSettings(...)``'s keyword arguments or the
    environment's ``FACET_*`` variables, said in one line per setting. Pydantic's own
    ``ValidationError`` (a multi-line report with links) reached a notebook's user of
    ``FacetSettings(device="tpu")``, where every other bad call is a ``FacetError``.
    ``errors()`` gives pydantic's list (each setting's ``loc``), for code that reads it."""

    def __init__(self, message: str, errors: list[Any]) -> None:
        super().__init__(message)
        self._errors = errors

    def errors(self) -> list[Any]:
        return self._errors


# ``BaseSettings``' own keyword arguments (``_env_file``, ``_secrets_dir``...), not settings.
_INIT_OPTIONS = frozenset(name for name in inspect.signature(BaseSettings.__init__).parameters
                          if name.startswith("_") and not name.startswith("__"))


# Settings whose value is a secret, and URL settings that may hold one (``__repr_args__``).
_SECRET_FIELDS = frozenset({"api_key", "ui_auth", "qdrant_api_key"})
_URL_FIELDS = frozenset({"database_url", "broker_url", "result_backend", "qdrant_url"})


class FacetSettings(BaseSettings):
    """Facet settings. Every field can be set as ``FACET_<FIELD>`` (for example ``FACET_DATA_DIR``).

    A keyword argument that is no setting is refused (``UnknownSettingError``, naming the
    closest one): ``FacetSettings(data_dirr="/x")`` used the default folder without a word.
    The environment's unknown ``FACET_*`` variables are only warned about
    (``warn_unknown_variables``), as other programs may set them.
    """

    # No inf or nan in any float setting: each became an OverflowError or ValueError traceback
    # where it was first turned into bytes or a timeout (FACET_LEASE_TTL_S=inf, ...).
    model_config = SettingsConfigDict(env_prefix="FACET_", env_file=None, extra="ignore",
                                      allow_inf_nan=False)

    # The default checked as a given value is (``_folder``): a dangling ~/.local/share/facet,
    # or a parent, refused naming its target. (``BaseSettings`` validates defaults already;
    # said here so the check does not hang on that. ``get_settings`` says it is the default.)
    data_dir: Path = Field(default_factory=_default_data_dir, validate_default=True,
                           description="where the embedded store, SQLite DB and caches live")

    model_cache_dir: Path | None = Field(
        default=None, description="converted backbone models; default ~/.cache/facet/models")
    checkpoint_dir: Path | None = Field(
        default=None, description="trained checkpoints registered by folder name; default the checkout's "
                                  "checkpoints/, else the installed share/facet-search/checkpoints")
    device: str | None = Field(
        default=None, description="cpu, cuda, cuda:1, mps, xpu; automatic (cuda when a GPU is "
                                  "present, else cpu) when unset or empty")
    dtype: str | None = Field(
        default=None, description="decoders' precision: float32, bfloat16, float16 (or fp32, bf16, "
                                  "fp16); default bfloat16 on CUDA, float32 on CPU; encoders "
                                  "(minilm) always run float32. Read by embedders.backbone itself; "
                                  "checked here so a bad value stops every command at its start")
    default_embedder: str = Field(default="minilm", description="corpus embedder for indexing and queries")
    # Stores and metadata (used by the indexer and the app services).
    qdrant_url: str | None = Field(
        default=None, description="Qdrant server URL; unset = embedded Qdrant edge in data_dir")
    qdrant_api_key: str | None = None
    # How a Qdrant server (FACET_QDRANT_URL) lays out the collections Facet creates; unset:
    # nothing is sent, Qdrant's own defaults. Existing collections keep theirs.
    qdrant_shards: int | None = Field(
        default=None, description="shard_number of each collection created on a Qdrant server; "
                                  "unset = Qdrant's default (1, or one per node in a cluster)")
    qdrant_replication_factor: int | None = Field(
        default=None, description="replication_factor of each collection created on a Qdrant "
                                  "server (copies of each shard, on distinct nodes); unset = "
                                  "Qdrant's default (1)")
    qdrant_write_consistency: int | None = Field(
        default=None, description="write_consistency_factor of each collection created on a "
                                  "Qdrant server (replicas that must acknowledge a write); "
                                  "unset = Qdrant's default (1)")
    vector_backend: str = Field(
        default="edge", description="'edge' (embedded qdrant-edge), 'local' (qdrant-client local mode) "
                                    "or 'server' (qdrant-client against qdrant_url)")
    database_url: str | None = Field(
        default=None, description="SQLAlchemy URL; unset = SQLite file in data_dir")
    # Indexing.
    chunk_tokens: int = Field(default=200, ge=1, le=MAX_CHUNK_TOKENS,
                              description="tokens per chunk for new collections")
    chunk_overlap: int | None = Field(
        default=None, description="tokens shared by consecutive chunks, smaller than the "
                                        "chunk size; unset = 32, or a quarter of chunks under "
                                        "128 tokens (chunk_overlap_for)")
    max_document_mb: float = Field(default=20.0, gt=0, le=1 << 30, description="larger documents are rejected")
    stream_document_mb: float = Field(
        default=4.0, gt=0, le=1 << 30, description="larger .txt/.md files are read and chunked in a stream "
                                       "(bounded memory, progress per chunk batch), larger "
                                       ".jsonl/.csv files parsed a line at a time")
    index_batch_chunks: int = Field(
        default=256, ge=1, description="chunks encoded, written and committed together while indexing")
    # Query encoding (search, /v1/embeddings): one model thread batching concurrent requests.
    query_threads: int = Field(
        default=1, ge=1, le=MAX_THREADS, description="torch threads of the query-encoding thread; 1 is fastest for "
                                     "one short query and never fights other work for the cores")
    index_threads: int | None = Field(
        default=None, ge=1, le=MAX_THREADS, description="torch threads of index jobs in their own process (a "
                                        "worker, `facet index --background`); unset = torch's "
                                        "default (all cores)")
    batch_max_texts: int = Field(default=64, ge=1,
                                 description="texts the query encoder encodes together at most")
    batch_wait_ms: float = Field(
        default=2.0, ge=0.0, le=60_000.0,
        description="how long the query encoder waits for more requests to share a batch (0 = "
                    "never wait; at most a minute)")
    max_pending_texts: int = Field(
        default=8192, ge=1, description="texts waiting for the query encoder before new requests "
                                        "are refused as busy (HTTP 429)")
    bulk_piece_ms: float = Field(
        default=500.0, ge=0.0, allow_inf_nan=False,
        description="bulk work (an index job's chunks, a clustering's texts, a large embed call) "
                    "holds the query encoder's model thread about this long at a time, waiting "
                    "queries served between the parts; 0 or 'off' = whole pieces of 32 texts")
    # Limits of one request, whatever the edge.
    max_texts_per_call: int = Field(default=2048, ge=1,
                                    description="texts one embed or cluster call may carry")
    max_cluster_texts: int = Field(default=5000, ge=2,
                                   description="texts one clustering may take from a collection")
    # What a process keeps between requests.
    query_cache_mb: float = Field(
        default=16, ge=0, le=1 << 30, allow_inf_nan=False,
        description="megabytes of vectors a search process keeps (its queries', embedded "
                    "queries', and the chunks a reranker read), so a search repeated with the same query, "
                    "instruction and embedders does not encode them again (16 MB: 3,640 "
                    "1,024-wide vectors with their keys); 0 keeps none")
    # HTTP API (facet serve).
    api_key: str | None = Field(
        default=None, description="when set, every request but /health and /ready needs "
                                  "'Authorization: Bearer <key>' (env FACET_API_KEY)")
    api_max_body_mb: float = Field(default=16.0, gt=0, le=1 << 30,
                                   description="larger request bodies are refused with 413")
    cors_origins: list[str] = Field(
        default_factory=list, description="browser origins (scheme://host[:port]) that may call "
                                          "the API from another origin (CORS; JSON list; [\"*\"]: "
                                          "any, without credentials); empty = no CORS headers")
    api_allowed_hosts: list[str] = Field(
        default_factory=list, description="without FACET_API_KEY: the host names (the Host header) "
                                          "the server answers besides IP addresses and localhost "
                                          "(JSON list; [\"*\"]: any); a page of another site could "
                                          "otherwise reach it through a name of its own (DNS rebinding); "
                                          "`facet ui` without a login reads it too")
    root_path: str = Field(
        default="", description="the path a reverse proxy serves Facet under (\"/facet\" for "
                                "https://host/facet/), the proxy removing it before it passes a "
                                "request on: the UI's links, /docs and the Location and Link headers "
                                "carry it; empty = served at the root (docs/deploy.md)")
    api_models: list[str] | None = Field(
        default=None, description="embedders the API may load (names or checkpoint paths, "
                                  "options included, exactly as requested); unset = the registered "
                                  "names and the default embedder")
    # Celery (full stack): docs/deploy.md.
    broker_url: str | None = Field(
        default=None, description="Celery broker (redis://host:6379/0); set = `facet index "
                                  "--background` and `facet serve` jobs go to `facet worker`s")
    result_backend: str | None = Field(
        default=None, description="Celery result backend; unset = the broker URL")
    encode_on_workers: bool = Field(
        default=False, description="send query encoding and rerank to the workers' `query` "
                                   "queue and bulk encoding to `index` (needs FACET_BROKER_URL)")
    worker_chunk_docs: int = Field(default=64, ge=1,
                                   description="documents per chunk task of a worker job; "
                                               "read by the `facet worker` that plans the job "
                                               "(set it on the workers: on `facet serve` alone "
                                               "it does nothing)")
    worker_parse_cache_mb: float = Field(
        default=512, gt=0, le=1 << 30, description="the parsed source files a worker process "
                                                   "keeps for the chunks that follow, by about "
                                                   "the memory their documents take (the last "
                                                   "one read is kept whatever that is, a large "
                                                   "record file a window of it at a time)")
    worker_poison_limit: int = Field(
        default=3, ge=1, description="a chunk whose worker died this many times is failed, not "
                                     "retried (recorded in the job table)")
    worker_preload: list[str] | None = Field(
        default=None, description="embedders each worker process loads at start (JSON list; "
                                  "[] loads none, each loads on its first task); unset = the "
                                  "default embedder")
    visibility_timeout_s: int = Field(
        default=3600, ge=10, description="Redis re-delivers a task unacknowledged this long: "
                                         "must exceed the longest chunk task")
    broker_timeout_s: float = Field(
        default=3.0, gt=0, le=_YEAR_S,
        description="how long a client waits for the broker to connect or to answer one request: "
                    "a broker that is down or stalled is an error after about this long, not a hang")
    worker_timeout_s: float = Field(
        default=60.0, gt=0, le=_YEAR_S,
        description="how long an encode sent to the workers may take before it is an error (no "
                    "worker on the queue?)")
    # Single writer per collection (app/services/leases.py), embedded store locks.
    lease_ttl_s: float = Field(
        default=60.0, ge=1.0, le=_YEAR_S,
        description="a writer that has not renewed its lease for this long is dead: its job shows "
                    "`interrupted`, another may write")
    store_wait_s: float = Field(
        default=3.0, ge=0.0, le=_YEAR_S,
        description="how long an embedded store waits for a collection another process has open "
                    "before saying so")
    min_free_mb: float = Field(
        default=64.0, ge=0.0, le=1 << 30,
        description="an index job stops cleanly, resumable, before a batch when the data folder's "
                    "disk has less free than this (MiB; 0: never): the embedded store's files are "
                    "memory-mapped, and a write past a full disk killed the process (bus error)")
    # Evaluation.
    shared_data_dir: Path = Field(default=Path("../shared/data"),
                                  description="root of the benchmark datasets; the default is "
                                              "relative to the current directory")
    # Gradio UI (facet ui, and /ui under facet serve).
    ui_auth: str | None = Field(
        default=None, description="'user:password' pairs, comma-separated, that the UI asks for; "
                                  "unset = the API key as the password (any user name) when "
                                  "FACET_API_KEY is set, else no login")
    ui_mount: bool = Field(default=True, description="facet serve also serves the UI at /ui "
                                                     "(when the ui extra is installed)")
    ui_allowed_roots: list[Path] = Field(
        default_factory=list, description="folders (JSON list) whose subfolders the Index tab may "
                                          "index; empty = uploads only")
    api_allowed_roots: list[Path] | None = Field(
        default=None, description="folders (JSON list) under which POST /jobs may index (links "
                                  "resolved, '..' folded); unset = any path the server process "
                                  "can read; [] = none")
    ui_max_upload_mb: float = Field(default=10.0, gt=0, le=1 << 30,
                                    description="larger uploaded files are refused")
    ui_max_query_chars: int = Field(
        default=2000, ge=1, description="queries and instructions are cut to this many characters "
                                        "(with a notice)")
    ui_concurrency: int = Field(
        default=1, ge=1, description="model-bound UI events (search, compare, cluster) running at "
                                     "once; the rest wait in the queue")
    ui_max_queue: int = Field(default=64, ge=1,
                              description="UI events waiting at most; more are refused as busy")
    ui_rerankers: list[str] = Field(
        default_factory=lambda: ["instemb", "inbedder"],
        description="instruction embedders the Search tab offers as rerankers")
    ui_examples: dict[str, list[str]] = Field(
        default_factory=dict, description="example instructions per collection (JSON object), "
                                          "shown beside the built-in ones")

    def __init__(self, **values: Any) -> None:
        fields = type(self).model_fields
        # In any case, as pydantic-settings reads them (``DATA_DIR=`` sets data_dir).
        unknown = [key for key in values
                   if key not in _INIT_OPTIONS and key.lower() not in fields]
        if unknown:
            said = []
            for key in unknown:
                close = difflib.get_close_matches(key.lower(), sorted(fields), n=1, cutoff=0.6)
                said.append(f"{key!r}" + (f" (did you mean {close[0]!r}?)" if close else ""))
            raise UnknownSettingError(
                f"FacetSettings got unknown setting(s) {', '.join(said)}; the settings are the "
                "FACET_* variables' names in lower case (FacetSettings.model_fields)")
        try:
            super().__init__(**values)
        except ValidationError as e:
            given = {key.lower() for key in values}
            raise InvalidSettingError("; ".join(_problem(error, given) for error in e.errors()),
                                      e.errors()) from None
        except SettingsError as e:
            raise InvalidSettingError(_unreadable(e), []) from None

    @classmethod
    def settings_customise_sources(
            cls, settings_cls: type[BaseSettings], init_settings: PydanticBaseSettingsSource,
            env_settings: PydanticBaseSettingsSource, dotenv_settings: PydanticBaseSettingsSource,
            file_secret_settings: PydanticBaseSettingsSource,
    ) -> tuple[PydanticBaseSettingsSource, ...]:
        return init_settings, _Environment(settings_cls), dotenv_settings, file_secret_settings

    @model_validator(mode="before")
    @classmethod
    def _trimmed(cls, data: Any) -> Any:
        """Every text value without its surrounding whitespace (a list's texts too), and an
        empty one unset (the default), whatever its type: before any field's own validator. The folders and
        ``api_allowed_roots`` keep an empty value, for ``_folder`` and ``_roots`` to refuse."""
        if not isinstance(data, dict):
            return data
        trimmed = {}
        for name, value in data.items():
            if isinstance(value, str):
                value = value.strip()
                if not value and name not in _EMPTY_REFUSED:
                    continue
            elif isinstance(value, list):  # a JSON list's texts too: '[" minilm "]' was unknown
                value = [item.strip() if isinstance(item, str) else item for item in value]
            trimmed[name] = value
        return trimmed

    @field_validator(*_FOLDERS, mode="before")
    @classmethod
    def _folder(cls, value: object, info: ValidationInfo) -> object:
        """``~`` expanded (a literal "./~/facet" was created); a folder that is (or is inside)
        a broken link refused, naming its target (it was "cannot be used: File exists"); and an
        empty value refused, unlike other settings: a folder's default is a place data is
        written to or looked for, and an empty value is a substitution that failed (a compose
        file's unset ``${FACET_DATA_DIR}`` put the database in the working directory), not a
        wish for the default. A name that does begin or end with a space (stripped, as every
        value is) is written "./ name" or "name /."."""
        if isinstance(value, str):
            if not value:
                raise ValueError("is empty: unset it for the default, or give a folder")
            value = Path(value)
        if not isinstance(value, Path):
            return value
        folder = _expanded(value)
        for link in (folder, *folder.parents):
            try:
                broken = link.is_symlink() and not link.exists()
            except OSError:  # not ours to look into (no permission): opening it says why
                broken = False
            if broken:
                target = os.path.normpath(link.parent / os.readlink(link))
                where = "is" if link == folder else f"is inside {link}, which is"
                raise ValueError(f"{where} a broken link to {target}: create {target}, or point "
                                 f"FACET_{str(info.field_name).upper()} at a folder that exists")
        if not folder.is_absolute() and info.field_name in _FOLDERS_OF_ONE_PLACE:
            # Read from the working folder, so each folder a command ran from had its own:
            # `facet collections` from another said "no collections yet", and the model cache
            # converted the 517 MB backbone again in each (the settings review of the sixth
            # session of 2026-12-06). Kept (a container's working folder is fixed), made
            # absolute so every line names the folder used, and said once.
            try:
                absolute = Path(os.path.abspath(folder))
            except OSError:  # the working folder is gone: opening it says so
                return folder
            name = f"FACET_{str(info.field_name).upper()}"
            if (name, str(folder)) not in _warned_relative:
                _warned_relative.add((name, str(folder)))
                logger.warning("%s=%r is a relative path: read as %s, from the current folder (a "
                               "command run from another folder uses another); give an absolute "
                               "path to use one folder from anywhere", name, str(folder), absolute)
            return absolute
        return folder

    @field_validator("ui_allowed_roots", "api_allowed_roots", mode="before")
    @classmethod
    def _roots(cls, value: object) -> object:
        """Each folder with ``~`` expanded, as the folder settings are (``_folder``): "~/docs"
        was kept as written, a root named "~" in the working directory; and an empty item
        refused (it was the working directory, ``Path("")``), naming the key."""
        if value == "":  # (FACET_API_ALLOWED_ROOTS only: the UI's roots default to none)
            raise ValueError("is empty: unset it to let POST /jobs index any path the server can read, "
                             "give [] for none, or a JSON list of folders")
        if not isinstance(value, list):
            return value
        roots = []
        for i, item in enumerate(value, 1):
            if isinstance(item, str):
                if not item.strip():
                    raise ValueError(f"item {i} is empty: remove it, or give a folder")
                item = Path(item.strip())
            roots.append(_expanded(item, i) if isinstance(item, Path) else item)
        return roots

    @field_validator("device", "dtype", "vector_backend", mode="before")
    @classmethod
    def _lower_case(cls, value: object) -> object:
        """A choice in any case is read as lower case and stored so: ``CUDA`` and ``BF16`` were
        refused while ``FACET_BULK_PIECE_MS`` took ``OFF`` (and ``Edge`` at the store's open)."""
        return value.lower() if isinstance(value, str) else value

    @field_validator("vector_backend")
    @classmethod
    def _backend(cls, value: str) -> str:
        """Checked at start: ``indexer.store.open_store`` refused a typo only when a command
        first opened the store (a worker, after loading its models)."""
        if value not in VECTOR_BACKENDS:
            raise ValueError(f"use {', '.join(VECTOR_BACKENDS[:-1])} or {VECTOR_BACKENDS[-1]}")
        return value

    @field_validator("device")
    @classmethod
    def _device(cls, value: str | None) -> str | None:
        """Only what torch reads as a device: ``gpu`` passed here and was a traceback from
        ``torch.device`` when the first model loaded (in a worker, at its start)."""
        if value is not None and not _DEVICE.fullmatch(value):
            raise ValueError(DEVICE_CHOICES)
        return value

    @field_validator("dtype")
    @classmethod
    def _dtype(cls, value: str | None) -> str | None:
        """Checked here, for every command: ``embedders.backbone`` reads it only when a decoder
        loads (an encoder ignores it), so ``FACET_DTYPE=abc`` went unnoticed until then."""
        if value is not None and value not in DTYPE_NAMES:
            raise ValueError(f"use one of {', '.join(DTYPE_NAMES)}; unset for the default")
        return value

    @field_validator("api_allowed_hosts")
    @classmethod
    def _host_names(cls, value: list[str]) -> list[str]:
        """Host names as the guard compares them: lower case, without a port. A name given with
        its port (``intranet.example:8443``, as a browser's address bar shows it) was accepted and
        never matched: the guard compares the request's name without its port."""
        names = []
        for item in value:
            name = item.strip().lower()
            with_port = re.fullmatch(r"(\[[^\]]*\]|[^:]*):\d*", name)
            names.append(with_port.group(1).strip("[]") if with_port else name)
        return names

    @field_validator("root_path")
    @classmethod
    def root_path_of(cls, value: str) -> str:
        """``value`` as a root path: "" for none, else "/a/b" (no trailing '/').

        Raises:
            ValueError: not a path (no leading '/', a query, a blank).
        """
        path = value.strip()
        if not path or path == "/":
            return ""
        if not path.startswith("/") or any(c in path for c in "?#") or any(c.isspace() for c in path):
            raise ValueError(f"{value!r} is not a URL path: give the prefix the proxy serves Facet "
                             "under, starting with '/' (\"/facet\"), or leave it empty")
        return path.rstrip("/")

    @field_validator("broker_url", "result_backend", "qdrant_url")
    @classmethod
    def _service_url(cls, value: str | None, info: ValidationInfo) -> str | None:
        """A URL that can be read, checked at start for every command (the settings review of
        the sixth session of 2026-12-06): a broker URL with a password holding "/" was "cannot
        reach the broker ... (ValueError: Port could not be cast ...)", its password in clear,
        and ``localhost:6379`` (no scheme) was read by kombu as an AMQP host "localhost:6379"
        ("Name or service not known" with Redis running); `facet serve` started with either.
        The broker's scheme must be a transport kombu knows; a result backend's or Qdrant's
        must be there. (A Qdrant URL without a scheme is read as http://HOST, and kept.)"""
        if value is None or not value.strip():
            return value
        from urllib.parse import urlsplit

        field = info.field_name or ""
        # Celery reads a list of URLs separated by ";" (failover brokers, sentinels), always:
        # each is read (a sentinel list's second "sentinel:" was read as the first one's port),
        # and a ";" in a password splits it there, as Celery would (it then failed with the
        # password's start in its message: its verification).
        listed = value.split(";") if field != "qdrant_url" else [value]
        if field == "result_backend" and not all("://" in part for part in listed):
            # A result backend's ";" may separate hosts alone (Celery's memcached:
            # "cache+memcached://h1:11211;h2:11211/", refused by its final read): the URL is
            # read up to the first, the other hosts are the backend's to read.
            listed = listed[:1]
        for url in listed:
            scheme, sep, _ = url.partition("://")
            if field != "qdrant_url":
                if not sep or not re.fullmatch(r"[A-Za-z][A-Za-z0-9+.-]*", scheme):
                    semicolon = ("; a ';' separates the URLs of a list, so one in a password "
                                 "must be written %3B" if len(listed) > 1 else "")
                    raise ValueError("not a URL (no scheme://): use redis://HOST:6379/0"
                                     + (" (or amqp://...)" if field == "broker_url" else "")
                                     + semicolon)
                if field == "broker_url":
                    known = _broker_transports()
                    if known and scheme.lower().split("+")[0] not in known:  # (sqla+postgresql)
                        raise ValueError(f"{scheme!r} is not a broker transport Celery knows; "
                                         "use redis://HOST:6379/0 (rediss:// with TLS) or "
                                         "amqp://...")
            try:
                parsed = urlsplit(url if sep else f"http://{url}")
                _ = parsed.port  # (ValueError: unreadable)
                if "@" in parsed.path:  # "redis://:p@ss/word@h": its host read as "ss"
                    raise ValueError(parsed.path)
            except ValueError:
                semicolon = (", ';'" if field != "qdrant_url" else "")
                raise ValueError(
                    "not a URL that can be read (its port is not a number from 0 to 65535, or "
                    "an '@' follows its host): a "
                    f"password (or user name) holding '/', '@', ':', '?'{semicolon} or '#' must "
                    "be percent-encoded ('/' as %2F, '@' as %40, ':' as %3A, '?' as %3F, "
                    + ("';' as %3B, " if semicolon else "") + "'#' as %23)") from None
        return value

    @field_validator("database_url")
    @classmethod
    def _database_url(cls, value: str | None) -> str | None:
        """A PostgreSQL or SQLite URL, checked at start for every command: another scheme
        (``mysql://``, a typo, a path without one) was "Can't load plugin: ..." (exit 1) when a
        command first opened the database. ``postgres://`` and ``postgresql://`` are read as
        ``postgresql+psycopg://`` by ``indexer.metadata.engine_url``. The message names the
        scheme alone, never the URL (it may hold a password)."""
        if value is None:
            return None
        found = _DATABASE_SCHEME.match(value)
        backend = found.group(1).split("+")[0].lower() if found else ""
        if backend not in ("postgres", "postgresql", "sqlite"):
            given = f"a {found.group(1)!r} URL" if found else "not a URL (no scheme://)"
            raise ValueError(
                f"{given}: Facet keeps its metadata in PostgreSQL or SQLite; use "
                "postgresql://USER:PASSWORD@HOST:PORT/DATABASE (postgres:// too) or "
                "sqlite:///PATH, or unset it for SQLite in the data folder")
        from sqlalchemy.engine import make_url

        from indexer.metadata import engine_url

        try:
            parsed = make_url(engine_url(value))
        except Exception:  # its text quoted the password's end ("invalid literal for int()")
            raise ValueError(
                "not a URL that can be read: a password (or user name) holding '@', ':', '/' "
                "or '#' must be percent-encoded ('@' as %40, ':' as %3A, '/' as %2F, '#' as "
                "%23)") from None
        # The driver, as SQLAlchemy loads it: an unknown one (`postgresql+foo://`) was a
        # traceback from `facet move-metadata --to` and "Can't load plugin" exit 1 elsewhere; an
        # async one (`+asyncpg`) or one not installed, "No module named ..." exit 1.
        try:
            dialect = parsed.get_dialect()
        except Exception:
            raise ValueError(f"{parsed.drivername!r}: SQLAlchemy has no such driver; use "
                             "postgresql:// (psycopg) or sqlite:///PATH") from None
        if getattr(dialect, "is_async", False):
            raise ValueError(f"{parsed.drivername!r} is an asyncio driver, which Facet cannot "
                             "use; use postgresql:// (psycopg) or sqlite:///PATH") from None
        try:
            dialect.import_dbapi()
        except ImportError as e:
            extra = (" (Facet's postgres extra: pip install 'facet-search[postgres]')"
                     if dialect.driver == "psycopg" else "")
            raise ValueError(f"the driver of {parsed.drivername!r} is not installed "
                             f"({type(e).__name__}: {e}){extra}; install it, or use "
                             "postgresql:// (psycopg)") from None
        if backend == "sqlite" and (parsed.database in (None, "", ":memory:")
                                    or parsed.query.get("mode") == "memory"):
            # Every command's metadata was gone when it exited (its index jobs, collections).
            raise ValueError("an in-memory SQLite database keeps nothing after each command; "
                             "use sqlite:///PATH (a file), or unset it for SQLite in the data "
                             "folder")
        return value

    @field_validator(*_QDRANT_LAYOUT, mode="before")
    @classmethod
    def _whole_number(cls, value: object) -> object:
        """A whole number, 1 or more (pydantic's "unable to parse string as an integer" and
        "greater than or equal to 1" did not say what the setting takes)."""
        if value is None:
            return None
        number: int | None = None
        if isinstance(value, int) and not isinstance(value, bool):
            number = value
        elif isinstance(value, str) and re.fullmatch(r"\+?\d+", value):
            number = int(value)
        if number is None or number < 1:
            raise ValueError("must be a whole number, 1 or more (written in digits); unset it "
                             "for Qdrant's default")
        return number

    @field_validator("qdrant_write_consistency")
    @classmethod
    def _consistency_within_replicas(cls, value: int | None, info: ValidationInfo) -> int | None:
        """No more acknowledging replicas than there are replicas: Qdrant would take the
        collection and then refuse or stall every write."""
        replicas = info.data.get("qdrant_replication_factor")
        if value is not None and replicas is not None and value > replicas:
            raise ValueError(f"must be at most FACET_QDRANT_REPLICATION_FACTOR ({replicas}): a "
                             "write waits for this many replicas of each shard")
        return value

    @model_validator(mode="after")
    def _layout_ignored(self) -> FacetSettings:
        """The Qdrant layout settings mean something to a Qdrant server only: set beside the
        embedded store (edge, or ``local``), they are said once per process to do nothing."""
        global _warned_layout
        given = [f"FACET_{name.upper()}" for name in _QDRANT_LAYOUT if getattr(self, name) is not None]
        if given and not self.uses_qdrant_server and not _warned_layout:
            _warned_layout = True
            store = ("qdrant-client's local mode (FACET_VECTOR_BACKEND=local)"
                     if self.vector_backend == "local" else "the embedded store (no FACET_QDRANT_URL)")
            logger.warning("%s %s only for collections created on a Qdrant server; %s ignores "
                           "%s", ", ".join(given), "applies" if len(given) == 1 else "apply",
                           store, "it" if len(given) == 1 else "them")
        return self

    def __repr_args__(self) -> Any:
        """The fields as the repr shows them: a secret as ``***``, a URL's password masked (the
        repr, in a debugger, a traceback with locals or a ``print(settings)``, showed the API
        key, the UI's passwords and the database's, broker's and Qdrant's passwords as set)."""
        for name, value in super().__repr_args__():
            if value and name in _SECRET_FIELDS:
                yield name, "***"
            elif isinstance(value, str) and name in _URL_FIELDS:
                yield name, masked_url(value)
            else:
                yield name, value

    @property
    def uses_qdrant_server(self) -> bool:
        """Whether the vectors go to a Qdrant server (as ``indexer.store.open_store`` picks)."""
        return bool(self.qdrant_url) and self.vector_backend in ("edge", "server")

    def qdrant_layout(self) -> dict[str, int]:
        """What a Qdrant server's ``create_collection`` is given beyond the vectors (only what
        is set: Qdrant's defaults otherwise), as ``indexer.store.open_store``'s ``layout``."""
        names = {"qdrant_shards": "shard_number", "qdrant_replication_factor": "replication_factor",
                 "qdrant_write_consistency": "write_consistency_factor"}
        return {key: value for name, key in names.items()
                if (value := getattr(self, name)) is not None}

    @field_validator("chunk_overlap")
    @classmethod
    def _overlap(cls, value: int | None, info: ValidationInfo) -> int | None:
        """As ``ChunkingConfig`` says it, at start: an overlap of the chunk size or more was
        cut to size - 1 (a one-token stride: 101 chunks for a 300-word document, not 2)."""
        tokens = info.data.get("chunk_tokens", MAX_CHUNK_TOKENS)  # absent: itself invalid
        if value is not None and not 0 <= value < tokens:
            raise ValueError(
                f"chunk overlap must be >= 0 and smaller than the chunk size ({tokens}, "
                f"FACET_CHUNK_TOKENS), got {value}; unset it for the default")
        return value

    @model_validator(mode="after")
    def _url_ignored(self) -> FacetSettings:
        """``local`` is qdrant-client's files in the data folder: a URL beside it was silently
        unused (the store said "a URL alone implies server"). A warning, not an error: a URL
        shared by a compose file's services may be overridden for one of them."""
        if self.vector_backend == "local" and self.qdrant_url:
            logger.warning("FACET_VECTOR_BACKEND=local ignores FACET_QDRANT_URL=%s: vectors go to "
                           "qdrant-local/ in the data folder; unset one of the two",
                           self.qdrant_url)
        return self

    def chunk_overlap_for(self, size: int) -> int:
        """The overlap of a new collection of ``size``-token chunks when the job gives none:
        ``FACET_CHUNK_OVERLAP``, else 32 but at most a quarter of the chunk. A fixed 32 on
        ``FACET_CHUNK_TOKENS=20`` was clamped to 19, a one-token stride (281 chunks for 300
        words); a quarter keeps the index within 4/3 of no overlap, and 200-token chunks keep 32.

        Raises:
            InvalidRequestError: ``FACET_CHUNK_OVERLAP`` is not smaller than ``size`` (a job's
                ``--chunk-tokens``; the setting itself is checked against FACET_CHUNK_TOKENS).
        """
        if self.chunk_overlap is None:
            return min(DEFAULT_CHUNK_OVERLAP, size // 4)
        if self.chunk_overlap >= size:
            from app.errors import InvalidRequestError

            raise InvalidRequestError(
                f"chunk overlap must be >= 0 and smaller than the chunk size ({size}), got "
                f"{self.chunk_overlap} (FACET_CHUNK_OVERLAP): give the job an overlap below {size} "
                "(--chunk-overlap)")
        return self.chunk_overlap

    @field_validator("bulk_piece_ms", mode="before")
    @classmethod
    def _off(cls, value: object) -> object:
        """'off' is 0: bulk work is not cut into timed parts (``BatchingQueryEncoder``). Any other
        word is refused naming both ways to turn it off (pydantic's own "unable to parse string
        as a number" did not say 'off' was allowed)."""
        if isinstance(value, str) and value.lower() == "off":
            return 0.0
        if isinstance(value, str):
            try:
                float(value)
            except ValueError:
                raise ValueError("not a valid number: give milliseconds (>= 0), or 'off' or 0 "
                                 "to not cut bulk work into timed parts") from None
        return value

    @property
    def resolved_database_url(self) -> str:
        if self.database_url:
            return self.database_url
        from sqlalchemy.engine import URL

        # Escaped: a "?" or "%41" in the folder's name put the database elsewhere (the part
        # after "?" read as URL options, so two data folders shared one database).
        return URL.create("sqlite", database=str(self.data_dir / "facet.db")).render_as_string(
            hide_password=False)

    @property
    def cache_dir(self) -> Path:
        return self.data_dir / "cache"

    # What start-up lines say is served (``facet serve``, ``facet worker``): never a password.
    def store_description(self) -> str:
        """``edge``, ``local`` or ``Qdrant at <url>`` (as ``indexer.store.open_store`` picks)."""
        if self.qdrant_url and self.vector_backend in ("edge", "server"):
            return f"Qdrant at {masked_url(self.qdrant_url)}"
        return self.vector_backend

    def preloaded(self) -> list[str]:
        """The embedders a worker process loads at start: ``FACET_WORKER_PRELOAD``, ``[]`` none
        (each loads on its first task: it was read as unset, the default embedder loaded), or,
        unset, the default embedder."""
        return list(self.worker_preload) if self.worker_preload is not None else [self.default_embedder]

    def database_description(self, *, path: bool = False) -> str:
        """``SQLite in the data dir`` (with ``path``: ``SQLite at <data dir>/facet.db``, for a
        line that does not name the data folder), or FACET_DATABASE_URL with its password
        masked."""
        if not self.database_url:
            return f"SQLite at {self.data_dir / 'facet.db'}" if path else "SQLite in the data dir"
        from sqlalchemy.engine import make_url

        try:
            return make_url(self.database_url).render_as_string(hide_password=True)
        except Exception:  # unparsable: opening it says why; never echo what may be a secret
            return "set (FACET_DATABASE_URL)"


def mask_passwords(text: str) -> str:
    """``text`` with the password of every URL in it, and every key-like query parameter's
    value (``?api_key=``), as ``***`` (``indexer.errors.mask_secrets``: one rule for the app and
    the indexer, which imports nothing of ``app``)."""
    from indexer.errors import mask_secrets

    return mask_secrets(text)


@lru_cache(maxsize=1)
def _broker_transports() -> frozenset[str]:
    """The URL schemes kombu reads as broker transports (none known: kombu, of the worker
    extra, not installed; the scheme is then not checked)."""
    try:
        from kombu.transport import TRANSPORT_ALIASES
    except ImportError:
        return frozenset()
    return frozenset(name.lower() for name in TRANSPORT_ALIASES) | {"unix", "rediss"}


def masked_url(url: str) -> str:
    """``url`` with its password (any characters) and key-like query parameters as ``***``
    (for log lines and messages; ``indexer.errors.masked_url``)."""
    from indexer import errors

    return errors.masked_url(url)


def known_variables() -> frozenset[str]:
    """Every FACET_* variable Facet reads: the settings' fields and ``OTHER_VARIABLES``."""
    return frozenset({f"FACET_{name.upper()}" for name in FacetSettings.model_fields}
                     | set(OTHER_VARIABLES))


def warn_unknown_variables(environ: Mapping[str, str]) -> list[str]:
    """Log a warning for each FACET_* variable in ``environ`` that Facet does not read, with
    the known name it is closest to, and return the unknown names. They were silently ignored
    (``extra="ignore"``): ``FACET_APIKEY=s3cret facet serve`` served without a key."""
    import difflib

    known = known_variables()
    # Any case: pydantic-settings reads ``facet_api_key`` as FACET_API_KEY.
    unknown = sorted(n for n in environ if n.upper().startswith("FACET_") and n.upper() not in known)
    for name in unknown:
        close = difflib.get_close_matches(name.upper(), sorted(known), n=1, cutoff=0.6)
        hint = f" (did you mean {close[0]}?)" if close else ""
        logger.warning("%s is not a Facet setting and is ignored%s", name, hint)
    return unknown


_warned_unknown = False  # once per process, however often the settings are read again


@lru_cache(maxsize=1)
def get_settings() -> FacetSettings:
    """The process-wide settings (read once). Tests build ``FacetSettings(...)`` directly.

    Raises:
        InvalidSettingError: a ``FACET_*`` variable that does not parse, named with what it
            should look like (pydantic's own report was a 50-line traceback from every command,
            even those that never use the variable).
    """
    global _warned_unknown
    if not _warned_unknown:
        _warned_unknown = True
        warn_unknown_variables(os.environ)
    return FacetSettings()


def _problem(error: Any, given: set[str]) -> str:
    """One refused setting in words: the keyword argument (a name in ``given``) or the
    ``FACET_*`` variable that set it, its value, what is wrong and, for a list or an object
    setting, how to write one."""

    loc = error["loc"]
    field = str(loc[0]) if loc else ""
    keyword = field in given
    name = field if keyword else (f"FACET_{field.upper()}" if loc else "a FACET_ variable")
    item = ""
    if len(loc) > 1:  # an item of a list, a key of an object (its value was shown alone)
        item = f" (item {int(loc[1]) + 1})" if isinstance(loc[1], int) else f" (key {loc[1]!r})"
    value = error.get("input")
    # No variable gave it: the default did (``data_dir``'s is checked), and
    # "FACET_DATA_DIR=PosixPath(...)" read as if the variable were set.
    unset = not keyword and len(loc) == 1 and not any(k.upper() == name for k in os.environ)
    said = f" (unset; its default {value})" if unset else f"={value!r}"
    if field == "database_url":  # a URL may hold a password: its scheme is said
        said = ""
    elif field in _URL_FIELDS and isinstance(value, str):  # shown with its password masked
        # (not at all where no "://" says where a password would be, and an "@" may end one)
        said = f"={masked_url(value)!r}" if "://" in value or "@" not in value else ""
    # How to write JSON, only where it was not read as the JSON the setting takes (a list
    # whose items were refused needs no lesson in lists), and never to a keyword's value.
    info = FacetSettings.model_fields.get(field) if loc else None
    kind = str(info.annotation) if info is not None else ""
    read = (isinstance(value, list) and kind.startswith("list[")) or \
        (isinstance(value, dict) and kind.startswith("dict["))
    hint = "" if read or keyword else _json_hint(loc)
    return f"{name}{item}{said}: {_message(error)}{hint}"


def _unreadable(error: Exception) -> str:
    """pydantic-settings' refusal of a variable it could not parse (JSON), in one line."""

    found = re.search(r'field "(\w+)"', str(error))
    field = found.group(1) if found else ""
    name = f"FACET_{field.upper()}" if field else "a FACET_ variable"
    value = f"={os.environ[name]!r}" if name in os.environ else ""
    return f"{name}{value} cannot be read{_json_hint((field,))}"


# pydantic's words for a value none of ``bool``'s (it accepts these, in any case).
_BOOL_WORDS = "use true or false (or yes/no, on/off, 1/0)"


def _message(error: Any) -> str:
    """What is wrong with one setting, in words: a validator's own message without pydantic's
    "Value error, " before it, and a bad boolean with the words it takes."""
    if error["type"] in ("value_error", "assertion_error") and "error" in error.get("ctx", {}):
        return str(error["ctx"]["error"])
    if error["type"] == "bool_parsing":
        return _BOOL_WORDS
    return str(error["msg"])


def _json_hint(loc: tuple[object, ...]) -> str:
    """For a list or an object setting, how to write one (as JSON); else nothing."""
    field = FacetSettings.model_fields.get(str(loc[0])) if loc else None
    annotation = str(field.annotation) if field is not None else ""
    if annotation.startswith("dict["):  # before lists: ``dict[str, list[str]]`` holds "list"
        return " (an object is written as JSON, e.g. '{\"name\": [\"first\", \"second\"]}')"
    if "list[" in annotation:
        return " (a list is written as JSON, e.g. '[\"first\", \"second\"]')"
    return ""


def apply_settings(settings: FacetSettings) -> None:
    """Push settings that lower layers need (they never read the environment themselves)."""
    # Imported only when needed: both modules import torch, which commands that never embed
    # (collections, jobs, delete) should not pay for.
    if settings.model_cache_dir is not None:
        from embedders import backbone

        backbone.set_cache_dir(settings.model_cache_dir)
    if settings.checkpoint_dir is not None:
        from embedders import registry

        registry.set_checkpoint_dir(settings.checkpoint_dir)
