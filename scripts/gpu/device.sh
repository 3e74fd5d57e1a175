#!/usr/bin/env bash
# Device-side steps of a GPU training run; each device call runs one of them from the repo root.
# Runbook (docs/training.md, "Training on a lent GPU"): pack here with scripts/gpu/pack.py, then
#   call k (k = 0..N-2):  bash scripts/gpu/device.sh stage      carry [".gpu/part-0k", ".gpu/SHA256SUMS"]
#   last part's call:     METHODS="..." bash scripts/gpu/device.sh all   (stage, setup, train the
#                         METHODS runs (default all five) side by side until DEADLINE_S seconds after
#                         the call began, collect into $OUT)
#   if the lease has time left, at once (the machine stays warm 30 s):
#                         bash scripts/gpu/device.sh cont       (continue the runs' bests at LR_SCALE,
#                         default 0.5, until DEADLINE_S after the call began; collect into $OUT; the
#                         first call's METHODS, kept in $WORK/methods)
# Name the device kind on the first call (the H200 for two or more GIRCSE runs: docs/training.md).
# The machine stays warm for 30 s between calls, so make them back to back. `go`/`wait`/`collect`
# split the last call for a lease longer than one 10-minute call.
set -euo pipefail
WORK=${FACET_GPU_WORK:-/tmp/facet-gpu}
RUN_OUT=$WORK/out  # the `cont` step writes to $WORK/out2, starting from $WORK/out's checkpoints
REPO=$(pwd)
PY=${PYTHON:-python3}
step=${1:?usage: device.sh stage|setup|all|go|wait|collect|smoke}

unxz() {  # xz stream on stdin -> tar stream on stdout (python's lzma: the image may lack xz)
  "$PY" -c "import lzma, shutil, sys; shutil.copyfileobj(lzma.open(sys.stdin.buffer), sys.stdout.buffer)"
}

stage() {
  mkdir -p "$WORK/parts"
  # a call may carry no part (every part staged by earlier calls, the room kept for a carried run)
  for f in .gpu/part-* .gpu/SHA256SUMS; do if [ -f "$f" ]; then cp "$f" "$WORK/parts/"; fi; done
  echo "staged: $(ls "$WORK/parts" | tr '\n' ' ')"
  # A part-00 left in the tree by the first call is still here in later ones: once the wheels are
  # installed the check is not run again (it cost a second call 21 s of device time on 2026-11-26).
  if [ -f .gpu/part-00 ] && [ "${SKIP_WHEELS:-0}" != 1 ] && ! wheels_installed; then
    # The wheels open the bundle, so the first part alone holds them: install them and try the
    # imports of a training run now, while a missing package can still be fixed before the last call.
    (unxz < .gpu/part-00 2>/dev/null | tar -x -C "$WORK" wheels 2>/dev/null) || true
    wheels
    env_file
    # shellcheck disable=SC1091
    source "$WORK/env.sh"
    imports
  fi
}

wheels_installed() { [ -d "$WORK/site/transformers" ]; }

wheels() {
  "$PY" -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target "$WORK/site" \
    "$WORK"/wheels/*.whl
}

imports() {
  "$PY" -c "import torch, transformers, peft; print('torch', torch.__version__, 'cuda', torch.cuda.is_available(),
      torch.cuda.get_device_name(0) if torch.cuda.is_available() else '-', '| transformers', transformers.__version__,
      '| peft', peft.__version__)"
  "$PY" -c "import app.cli, gguf, sklearn, embedders.training.trainer, embedders.training.data, app.evaluation.dev
from embedders.registry import trainable_methods; print('methods:', ' '.join(trainable_methods()))"
}

setup() {
  (cd "$WORK/parts" && sha256sum -c --quiet SHA256SUMS)
  cat "$WORK"/parts/part-* | unxz | tar -x -C "$WORK"
  if [ "${SKIP_WHEELS:-0}" != 1 ] && ! wheels_installed; then wheels; fi
  env_file
  # shellcheck disable=SC1091
  source "$WORK/env.sh"
  imports
}

env_file() {
  cat > "$WORK/env.sh" <<ENV
export PYTHONPATH="$WORK/site:$REPO"
export FACET_SHARED_DATA_DIR="$WORK/data" FACET_DATA_DIR="$WORK/facet" FACET_MODEL_CACHE_DIR="$WORK/models"
export HF_HUB_OFFLINE=1 HF_HUB_DISABLE_TELEMETRY=1 TOKENIZERS_PARALLELISM=false PYTHONUNBUFFERED=1
export PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True
ENV
}

start() {
  # shellcheck disable=SC1091
  source "$WORK/env.sh"
  mkdir -p "$RUN_OUT"
  # Each call is a fresh shell: `cont` runs the METHODS the first call ran (without it, the
  # default five, none of which the first call had trained: "no checkpoint at ...").
  if [ -n "${METHODS:-}" ]; then echo "$METHODS" > "$WORK/methods"
  elif [ -f "$WORK/methods" ]; then METHODS=$(cat "$WORK/methods"); export METHODS; fi
  setsid nohup env DEADLINE="${DEADLINE:-}" bash "$REPO/scripts/gpu/train_all.sh" "$RUN_OUT" \
      > "$WORK/train.log" 2>&1 < /dev/null &
  echo $! > "$WORK/train.pid"
  echo "training started (pid $(cat "$WORK/train.pid")); log $WORK/train.log"
}

wait_run() {
  local limit=${WAIT_S:-560} waited=0
  # polled every second: each second waited past the runs' end is lease time spent on nothing
  while kill -0 "$(cat "$WORK/train.pid")" 2>/dev/null && [ "$waited" -lt "$limit" ]; do
    sleep 1; waited=$((waited + 1))
  done
  grep -v "it/s\]$" "$WORK/train.log" | tail -n 40 || true
  if kill -0 "$(cat "$WORK/train.pid")" 2>/dev/null; then echo "STILL RUNNING after ${waited}s"; else echo "DONE"; fi
}

collect() {
  # At most 8 files come back from $OUT (16 MiB each, 64 MiB together; on 2026-11-27 five runs'
  # best + last weights made 12 files and four did not come back), so one file per run, its
  # end-of-run weights inside, and the logs with train.log in one more: six files for five runs.
  local out=${OUT:?collect writes into \$OUT}
  shopt -s nullglob  # no run kept weights: no file named "ckpt-*.tgz"
  mkdir -p "$RUN_OUT/logs"
  cp "$WORK/train.log" "$RUN_OUT/logs/train.log" 2>/dev/null || true
  (cd "$RUN_OUT" && tar -czf "$out/logs.tgz" logs)
  for dir in "$RUN_OUT"/checkpoints/*/; do
    name=$(basename "$dir")
    case $name in *-last) continue ;; esac
    local parts=("$name")
    [ -d "$RUN_OUT/checkpoints/$name-last" ] && parts+=("$name-last")
    (cd "$RUN_OUT/checkpoints" && tar -czf "$out/ckpt-$name.tgz" "${parts[@]}")
  done
  ls -la "$out"
}

# A call cut by its time limit (the device tool's timeout sends TERM first) still brings back
# what the runs kept: collect ran only after the wait, and nothing came back.
on_term() { echo "TERM: collecting what the runs kept"; collect || true; exit 143; }

case "$step" in
  stage) stage ;;
  setup) setup ;;
  go) stage; setup; start; wait_run ;;
  all)  # one call: DEADLINE_S (default 500) seconds after it began, the runs still going are stopped
    began=$(date +%s); stage; setup
    trap on_term TERM
    export DEADLINE=$((began + ${DEADLINE_S:-500})); start; WAIT_S=$((DEADLINE - $(date +%s) + 30)) wait_run
    collect ;;
  cont)  # a second call on the still-warm machine: the first call's bests, continued at LR_SCALE
    began=$(date +%s)
    export INIT_ROOT=$WORK/out/checkpoints LR_SCALE=${LR_SCALE:-0.5} SEED=${SEED:-12}
    RUN_OUT=$WORK/out2; rm -rf "$RUN_OUT"
    trap on_term TERM
    export DEADLINE=$((began + ${DEADLINE_S:-200})); start; WAIT_S=$((DEADLINE - $(date +%s) + 30)) wait_run
    collect ;;
  wait) wait_run ;;
  collect) collect ;;
  smoke)  # the whole path on this machine (CPU, the venv's python, its packages instead of the
          # cp312 wheels, 3-step budgets): checks the scripts and bundle, not the GPU
    WORK=${FACET_GPU_WORK:-$(mktemp -d)}; RUN_OUT=$WORK/out; export SKIP_WHEELS=1; stage; setup
    # shellcheck disable=SC1091
    source "$WORK/env.sh"; SMOKE=1 bash "$REPO/scripts/gpu/train_all.sh" "$WORK/out" 2>&1 | tee "$WORK/train.log"
    OUT=$WORK/collected
    mkdir -p "$OUT"; collect
    # and a second call's continuation of those runs (`cont`), from what the first one kept
    RUN_OUT=$WORK/out2
    INIT_ROOT=$WORK/out/checkpoints LR_SCALE=0.5 SMOKE=1 bash "$REPO/scripts/gpu/train_all.sh" "$RUN_OUT" 2>&1 \
        | tee "$WORK/train.log"
    OUT=$WORK/collected2
    mkdir -p "$OUT"; collect ;;
  *) echo "unknown step $step" >&2; exit 2 ;;
esac
