"""Celery workers: the index and query queues of the full stack (docs/deploy.md)."""
