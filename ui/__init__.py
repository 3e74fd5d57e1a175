"""Facet's Gradio UI: search, compare, cluster, index and collections over ``app.core.Facet``.

``facet ui`` serves it alone; ``facet serve`` mounts it at ``/ui``. Importing this package
turns Gradio's analytics and Hugging Face Hub calls off before Gradio is imported (the page
must work offline); see docs/ui.md.
"""

from __future__ import annotations

import os

os.environ.setdefault("GRADIO_ANALYTICS_ENABLED", "False")
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("HF_HUB_DISABLE_TELEMETRY", "1")
