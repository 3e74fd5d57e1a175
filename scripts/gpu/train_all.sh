#!/usr/bin/env bash
# Continue every committed checkpoint on a lent GPU, all five methods at once, and put the
# results in $1 (checkpoints/NAME, logs/NAME.log).
#
# Why at once: one 135M-parameter training process leaves the GPU mostly idle (its steps are
# bound by kernel launches), and a lent GPU comes for ~15 minutes in all, so five processes side
# by side get far more steps than five in a row, each paying its load and step-0 evaluation.
# Each run gets the same wall-clock budget with its learning rate decaying over that budget
# (--decay-over time: the step speed on the lent card is not known in advance), is scored on its
# dev suite every EVAL_EVERY_MIN minutes and keeps its best-on-dev weights (the start included, so
# a run that does not help keeps the committed weights). Memory: the corpus methods at batch 64
# recompute activations (--grad-checkpointing); GIRCSE cannot (its KV cache). On 2026-11-26 (H200)
# the five together held 50.7 of 141 GB with GIRCSE and the instruction methods at batch 32, and
# GIRCSE got 116 steps of 32 (its K=5 generation is sequential) against Causal-EOS's 349 of 64, which
# left it behind Causal-EOS; so GIRCSE now takes batch 64 too (a launch-bound step costs about the
# same at 64), the instruction methods 32. A watchdog sends SIGTERM to any run still going at DEADLINE
# (epoch seconds; `facet train` then keeps its best checkpoint and writes its log).
# What two leases showed: the corpus runs gain on every lease; the instruction methods' GPU
# continuations fell on dev both times (InstEmb at 3e-4, InBedder at 3e-4 and at 1e-4 on four val
# samples), so METHODS="causal-eos causal2vec gircse" is the better use of the next one. The fourth lease
# gave the GPU to GIRCSE alone (METHODS="gircse gircse-lr2"), and it did not buy speed: 104 steps of 64
# per run in 7.3 minutes (3.5 s/step) against 141-143 (2.65) for each of two GIRCSE runs beside two
# corpus runs on the third lease's H200; why is not known.
#
# Env: TRAIN_MIN (default 5.5), EVAL_EVERY_MIN (1.5), DEADLINE (default now + TRAIN_MIN + 3 min),
# METHODS (run names, default all five; gircse-linear is GIRCSE with the stepwise losses weighted by k,
# which the committed GIRCSE now carries in its config, so plain `gircse` continues it the same way;
# NAME=PATH starts run NAME from PATH, relative to the repository, instead of the committed checkpoint,
# e.g. gircse-c2=runs/gircse-c2 for a not-shipped candidate carried to the device; any gircse-* name is
# a GIRCSE run with GIRCSE's recipe; gircse-lr2 is that recipe at twice the learning rate, for a lease
# that gives GIRCSE the whole GPU: two GIRCSE runs instead of one beside the other methods;
# gircse-later is gircse-lr2 with the refinement penalty moving only the later step;
# instemb-steer is InstEmb with steer quads in 40% of its batches at lr 1e-4),
# INIT_ROOT (where each run's start is, default the committed checkpoints/: RUN there, else METHOD),
# LR_SCALE (default 1: multiplies each recipe's learning rate, e.g. 0.5 for a second call that
# continues the first call's bests), SEED (11), DEV_CORPUS (sample: the corpus runs' SciFact dev over
# 400 abstracts cut to 64 words, as every lease so far; whole: over the 5,183 whole abstracts users
# search, which picked the served budgets that test later agreed with where the 400 did not; its
# cost per evaluation on a GPU is not measured yet, ~20 min on one CPU thread), DEV_STS (unset: the
# corpus runs score the seeded 400 STS-B dev pairs; all: every 1,500, which halves that part's
# selection noise; estimated +20 s per GIRCSE evaluation on the H200, scaled from its 13 s for 400
# pairs plus SciFact dev, not measured), SMOKE=1 (2-step runs with a 20-item dev set, any
# device: a check of the script, not of the GPU).
set -uo pipefail
OUTDIR=${1:?usage: train_all.sh OUTDIR}
REPO=$(cd "$(dirname "$0")/../.." && pwd)
PY=${PYTHON:-python3}
mkdir -p "$OUTDIR/checkpoints" "$OUTDIR/logs"
cd "$OUTDIR"

TRAIN_MIN=${TRAIN_MIN:-5.5}
EVAL_EVERY_MIN=${EVAL_EVERY_MIN:-1.5}
DEADLINE=${DEADLINE:-$(( $(date +%s) + ${TRAIN_MIN%.*} * 60 + 180 ))}
METHODS=${METHODS:-"causal-eos causal2vec gircse instemb inbedder"}
INIT_ROOT=${INIT_ROOT:-$REPO/checkpoints}
LR_SCALE=${LR_SCALE:-1}
SEED=${SEED:-11}
DEV_CORPUS=${DEV_CORPUS:-sample}
DEV_STS=${DEV_STS:-}
CORPUS_DEV="--dev-corpus $DEV_CORPUS${DEV_STS:+ --dev-sts-pairs $DEV_STS}"  # the corpus recipes' dev flags
if [ "${SMOKE:-0}" = 1 ]; then
  LIMIT="--stop-after 2 --steps 4"; SIZES="--dev-size 20"; BIG=4; SMALL=4; HUGE=4; CHUNK=2
else
  LIMIT="--steps 100000 --time-budget-min $TRAIN_MIN --decay-over time --eval-every-min $EVAL_EVERY_MIN"
  SIZES=""; BIG=64; SMALL=32; HUGE=256; CHUNK=64
fi
export OMP_NUM_THREADS=${OMP_NUM_THREADS:-2}

lr() { "$PY" -c "print('%g' % ($1 * $LR_SCALE))"; }

method_of() { case $1 in gircse-*) echo gircse ;; instemb-*) echo instemb ;; *) echo "$1" ;; esac; }

args_for() {  # the recipe of each run's continuation (its method's config rides in the checkpoint)
  case $1 in
    causal-eos) echo "--batch-size $BIG --grad-checkpointing --teacher minilm --teacher-weight 1.0 --lr $(lr 1e-4) \
$CORPUS_DEV" ;;
    causal2vec) echo "--batch-size $BIG --grad-checkpointing --teacher minilm --teacher-weight 1.0 --lr $(lr 1e-4) \
--head-lr-mult 10 $CORPUS_DEV" ;;
    gircse) echo "--batch-size $BIG --teacher minilm --teacher-weight 1.0 --lr $(lr 1e-4) $CORPUS_DEV" ;;
    gircse-linear) echo "$(args_for gircse) --set step_weighting=linear" ;;
    gircse-lr2) LR_SCALE=$(lr 2) args_for gircse ;;  # the same recipe, lr x2 (lr 2 prints 2 x LR_SCALE)
    # GIRCSE at four times the batch, in gradient-cache chunks of 64 (memory of a batch of 64, one
    # extra forward pass): on the second lease 64 instead of 32 cost 10% per step, and every lease so
    # far ended with GIRCSE still gaining. A CPU smoke run (SMOKE=1, 4 in chunks of 2) works; not
    # yet run on a GPU: a lease that tries it should run it beside gircse-lr2 (the same lr).
    gircse-b256) echo "--batch-size $HUGE --grad-cache $CHUNK --teacher minilm --teacher-weight 1.0 --lr $(lr 2e-4) \
$CORPUS_DEV" ;;
    # gircse-lr2's recipe with the refinement penalty aimed at the later step only (L_k detached):
    # the paper's form pushes L_k up as hard as L_k+1 down, and at the shipped weight x5 that
    # rewarded a worse 4-token embedding on the 59% of SNLI steps where L5 > L4 (the maths audit of
    # 2026-12-03, docs/results.md). Not yet run on a GPU: run it beside gircse-lr2, its control.
    gircse-later) echo "$(args_for gircse-lr2) --set refinement_target=later" ;;
    gircse-*) args_for gircse ;;
    instemb) echo "--batch-size $SMALL --lr $(lr 3e-4) --dev-samples 2" ;;
    # InstEmb with steer quads in 40% of batches (two texts of one coarse answer under the fine and
    # the coarse instruction), at a third of instemb's rate: its one unmet bar is the steer gap, and
    # at 3e-4 its GPU continuation fell on dev.
    instemb-steer) echo "--batch-size $SMALL --lr $(lr 1e-4) --dev-samples 2 --tasks \
banking77-steer:0.25,emotion-steer:0.15,c3:0.1,dream:0.1,squad:0.1,banking77:0.1,emotion:0.05,\
banking77-area:0.05,emotion-valence:0.05,squad-topic:0.05" ;;
    inbedder) echo "--batch-size $SMALL --lr $(lr 1e-4) --dev-samples 4" ;;
    *) echo "unknown run $1" >&2; return 1 ;;
  esac
}

init_for() {  # the run's own start if INIT_ROOT has one (a second call), else the PATH its METHODS
              # entry gave ($2), else its method's checkpoint
  if [ -d "$INIT_ROOT/$1" ]; then echo "$INIT_ROOT/$1"
  elif [ -n "${2:-}" ]; then case $2 in /*) echo "$2" ;; *) echo "$REPO/$2" ;; esac
  else echo "$INIT_ROOT/$(method_of "$1")"; fi
}

declare -A PIDS INIT EXTRA
NAMES=()
for spec in $METHODS; do  # every entry's recipe and start resolved before any run starts
  name=${spec%%=*}; from=""
  [ "$spec" != "$name" ] && from=${spec#*=}
  EXTRA[$name]=$(args_for "$name") || exit 2
  INIT[$name]=$(init_for "$name" "$from")
  [ -d "${INIT[$name]}" ] || { echo "no checkpoint at ${INIT[$name]} for run $name" >&2; exit 2; }
  NAMES+=("$name")
done
for name in "${NAMES[@]}"; do
  init=${INIT[$name]}; extra=${EXTRA[$name]}
  echo "=== $name: train from $(date -u +%T), from $init: $extra"
  # --last-out: the end-of-run weights too (best on dev or not), brought back as soup ingredients.
  # --force: a rerun on the same machine replaces its own earlier attempt at checkpoints/$name.
  # shellcheck disable=SC2086
  "$PY" -m app train "$(method_of "$name")" --out "checkpoints/$name" --last-out "checkpoints/$name-last" --force \
      --init-from "$init" --max-length 96 \
      --seed "$SEED" $LIMIT $SIZES $extra > "logs/$name.log" 2>&1 &
  PIDS[$name]=$!
done

running() { for pid in "${PIDS[@]}"; do kill -0 "$pid" 2>/dev/null && return 0; done; return 1; }
tick=0
while running; do  # checked every second (the runs' end is seen at once), the GPU logged every 30
  if [ "$(date +%s)" -ge "$DEADLINE" ]; then
    echo "=== deadline: SIGTERM to the runs still going ($(date -u +%T))"
    for pid in "${PIDS[@]}"; do kill -TERM "$pid" 2>/dev/null; done
    sleep 15
    for pid in "${PIDS[@]}"; do kill -KILL "$pid" 2>/dev/null; done
    break
  fi
  if [ $((tick % 30)) -eq 0 ] && command -v nvidia-smi >/dev/null; then
    nvidia-smi --query-gpu=utilization.gpu,memory.used,memory.total --format=csv,noheader \
        | sed "s/^/[$(date -u +%T)] gpu: /"
  fi
  tick=$((tick + 1))
  sleep 1
done
for name in "${!PIDS[@]}"; do
  wait "${PIDS[$name]}"; rc=$?
  echo "=== $name: exit $rc"
  tr '\r' '\n' < "logs/$name.log" | grep -E "dev at step|time budget|interrupted|Error" | cut -c1-400 | tail -n 4
done
echo "=== all done ($(date -u +%T))"
