"""The schema of issue 6 (before migrations existed): collections, documents, chunks, jobs.

Revision ID: 0001
Revises:
Create Date: 2026-11-23
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0001"
down_revision = None
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "collections",
        sa.Column("id", sa.Integer(), primary_key=True),
        sa.Column("name", sa.String(128), nullable=False, unique=True),
        sa.Column("backend", sa.String(16), nullable=False),
        sa.Column("chunk_size", sa.Integer(), nullable=False),
        sa.Column("chunk_overlap", sa.Integer(), nullable=False),
        sa.Column("tokenizer", sa.String(256), nullable=False),
        sa.Column("created_at", sa.DateTime(), nullable=False),
    )
    op.create_table(
        "collection_embedders",
        sa.Column("id", sa.Integer(), primary_key=True),
        sa.Column("collection_id", sa.Integer(),
                  sa.ForeignKey("collections.id", ondelete="CASCADE"), nullable=False),
        sa.Column("name", sa.String(128), nullable=False),
        sa.Column("dim", sa.Integer(), nullable=False),
        sa.Column("identity", sa.Text(), nullable=False),
        sa.UniqueConstraint("collection_id", "name"),
    )
    op.create_table(
        "documents",
        sa.Column("id", sa.Integer(), primary_key=True),
        sa.Column("collection_id", sa.Integer(),
                  sa.ForeignKey("collections.id", ondelete="CASCADE"), nullable=False),
        sa.Column("key", sa.String(1024), nullable=False),
        sa.Column("source", sa.String(1024), nullable=False),
        sa.Column("title", sa.Text(), nullable=True),
        sa.Column("content_hash", sa.String(64), nullable=True),
        sa.Column("status", sa.String(16), nullable=False),
        sa.Column("error", sa.Text(), nullable=True),
        sa.Column("warning", sa.Text(), nullable=True),
        sa.Column("n_chunks", sa.Integer(), nullable=False),
        sa.Column("meta", sa.JSON(), nullable=False),
        sa.Column("updated_at", sa.DateTime(), nullable=False),
        sa.UniqueConstraint("collection_id", "key"),
    )
    op.create_index("ix_documents_collection_id", "documents", ["collection_id"])
    op.create_index("ix_documents_source", "documents", ["source"])
    op.create_table(
        "document_vectors",
        sa.Column("id", sa.Integer(), primary_key=True),
        sa.Column("document_id", sa.Integer(),
                  sa.ForeignKey("documents.id", ondelete="CASCADE"), nullable=False),
        sa.Column("embedder", sa.String(128), nullable=False),
        sa.Column("content_hash", sa.String(64), nullable=False),
        sa.UniqueConstraint("document_id", "embedder"),
    )
    op.create_table(
        "chunks",
        sa.Column("id", sa.Integer(), primary_key=True),
        sa.Column("document_id", sa.Integer(),
                  sa.ForeignKey("documents.id", ondelete="CASCADE"), nullable=False),
        sa.Column("number", sa.Integer(), nullable=False),
        sa.Column("point_id", sa.String(36), nullable=False),
        sa.Column("start", sa.Integer(), nullable=False),
        sa.Column("end", sa.Integer(), nullable=False),
        sa.Column("n_tokens", sa.Integer(), nullable=False),
        sa.Column("text", sa.Text(), nullable=False),
        sa.UniqueConstraint("document_id", "number"),
    )
    op.create_index("ix_chunks_document_id", "chunks", ["document_id"])
    op.create_table(
        "index_jobs",
        sa.Column("id", sa.Integer(), primary_key=True),
        sa.Column("collection_id", sa.Integer(),
                  sa.ForeignKey("collections.id", ondelete="CASCADE"), nullable=False),
        sa.Column("source", sa.String(1024), nullable=False),
        sa.Column("embedder", sa.String(128), nullable=False),
        sa.Column("state", sa.String(16), nullable=False),
        sa.Column("pid", sa.Integer(), nullable=True),
        sa.Column("resumed_from", sa.Integer(), nullable=True),
        sa.Column("docs_seen", sa.Integer(), nullable=False),
        sa.Column("docs_indexed", sa.Integer(), nullable=False),
        sa.Column("docs_skipped", sa.Integer(), nullable=False),
        sa.Column("docs_failed", sa.Integer(), nullable=False),
        sa.Column("docs_deleted", sa.Integer(), nullable=False),
        sa.Column("chunks_written", sa.Integer(), nullable=False),
        sa.Column("parse_s", sa.Float(), nullable=False),
        sa.Column("encode_s", sa.Float(), nullable=False),
        sa.Column("store_s", sa.Float(), nullable=False),
        sa.Column("metadata_s", sa.Float(), nullable=False),
        sa.Column("message", sa.Text(), nullable=True),
        sa.Column("started_at", sa.DateTime(), nullable=False),
        sa.Column("finished_at", sa.DateTime(), nullable=True),
    )
    op.create_index("ix_index_jobs_collection_id", "index_jobs", ["collection_id"])
    op.create_table(
        "job_errors",
        sa.Column("id", sa.Integer(), primary_key=True),
        sa.Column("job_id", sa.Integer(), sa.ForeignKey("index_jobs.id", ondelete="CASCADE"),
                  nullable=False),
        sa.Column("document_key", sa.String(1024), nullable=False),
        sa.Column("kind", sa.String(16), nullable=False),
        sa.Column("message", sa.Text(), nullable=False),
    )
    op.create_index("ix_job_errors_job_id", "job_errors", ["job_id"])


def downgrade() -> None:
    for table in ("job_errors", "index_jobs", "chunks", "document_vectors", "documents",
                  "collection_embedders", "collections"):
        op.drop_table(table)
