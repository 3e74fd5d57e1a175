#!/usr/bin/env bash
# Train and evaluate all five methods on a lent GPU, continuing the committed checkpoints
# (--init-from), each with a time budget, then evaluate them; results and checkpoints go to $1.
# Budgets (minutes) sum to ~22 by default, inside one 30-minute device session with staging.
# SMOKE=1 runs every step with 2-step budgets on whatever device is present (a script check).
set -uo pipefail
OUTDIR=${1:?usage: train_all.sh OUTDIR}
REPO=$(cd "$(dirname "$0")/../.." && pwd)
PY=${PYTHON:-python3}
mkdir -p "$OUTDIR/checkpoints" "$OUTDIR/results"
cd "$OUTDIR"

if [ "${SMOKE:-0}" = 1 ]; then
  STEPS=3; BATCH=4; EVERY=2; BUDGET_SCALE=0; EVAL="--suite quick --tasks stsb"; IEVAL="--suite quick --tasks stsb"
  SIZES="--dev-size 20"; KS="1 2"
else
  STEPS=${STEPS:-3000}; BATCH=${BATCH:-64}; EVERY=${EVERY:-100}; BUDGET_SCALE=1; SIZES=""
  EVAL="--suite full --tasks stsb,sick,scifact"; IEVAL="--suite quick --tasks clinc-multiview,goalex-agnews,goalex-dbpedia"
  KS="1 2 3 4 5 10 20"
fi
budget() { if [ "$BUDGET_SCALE" = 1 ]; then echo "--time-budget-min $1"; else echo "--stop-after 2"; fi; }

run() {  # name, budget (min), eval args, extra train args...
  local name=$1 minutes=$2 evalargs=$3; shift 3
  echo "=== $name: train ($(date -u +%T))"
  # shellcheck disable=SC2046,SC2086
  $PY -m app train "$name" --out "checkpoints/$name" --init-from "$REPO/checkpoints/$name" --steps "$STEPS" \
      --batch-size "$BATCH" --eval-every "$EVERY" $(budget "$minutes") $SIZES "$@" || echo "!!! $name training failed"
  echo "=== $name: eval ($(date -u +%T))"
  # shellcheck disable=SC2086
  $PY -m app eval "checkpoints/$name" $evalargs --baselines '' --no-progress --out "results/$name" \
      || echo "!!! $name eval failed"
}

run causal-eos "${T_EOS:-3.5}" "$EVAL" --teacher minilm --lr 2e-4
run causal2vec "${T_C2V:-3.5}" "$EVAL" --teacher minilm --lr 2e-4 --head-lr-mult 10
run gircse "${T_GIRCSE:-6}" "$EVAL" --teacher minilm --lr 2e-4
run instemb "${T_INSTEMB:-3.5}" "$IEVAL" --lr 3e-4
run inbedder "${T_INBEDDER:-3.5}" "$IEVAL" --lr 3e-4
for k in $KS; do
  # shellcheck disable=SC2086
  $PY -m app eval "checkpoints/gircse[soft_tokens=$k]" ${EVAL%%,*} --baselines '' --no-progress \
      --out "results/gircse-k$k" || echo "!!! gircse K=$k eval failed"
done
echo "=== all done ($(date -u +%T))"
