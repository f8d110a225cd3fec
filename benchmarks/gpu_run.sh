#!/bin/bash
# Issue 26's GPU measurement in ONE device call (docs/scale.md, "GPU: how to measure").
#
# Here, once, from the checkout root (a worktree needs the venv: ln -s /work/main/.venv .venv):
#     ../shared/device/prepare.sh Computers Physics
# Then one device call from the checkout root, carrying .device:
#     run(command="bash benchmarks/gpu_run.sh", carry=[".device"], timeout_s=540)
# It installs the wheels the device image lacks, runs the `gpu` tests (sync-debug mode around
# the step loops), then benchmarks/bench_gpu.py --device cuda, all within about 7 minutes
# (the benchmark starts no cell past its budget and is stopped at the deadline; its JSON is
# written after every cell). Everything lands in $OUT: gpu-tests.txt, bench_gpu.txt,
# bench_gpu.json, importtime.txt.
set -u
T0=$(date +%s)
END=$((T0 + ${GPU_RUN_SECONDS:-420}))
S=$(mktemp -d)
OUT=${OUT:-$S/out}
mkdir -p "$OUT" "$S/data"
python3 -m pip install -q --no-index --no-deps --no-compile --target "$S/site" .device/whl/*.whl \
  || { echo "wheels missing: run ../shared/device/prepare.sh Computers Physics first"; exit 1; }
export PYTHONPATH=$S/site:$PWD/src PYTHONUNBUFFERED=1
for p in .device/data/*/; do
  n=$(basename "$p"); mkdir -p "$S/data/$n"; ln -sfn "$PWD/$p/raw" "$S/data/$n/raw"
done
nvidia-smi --query-gpu=name,memory.total --format=csv,noheader
nproc
python3 -X importtime -c "import gnnprivacy.training.node_dp" 2> "$OUT/importtime.txt"
timeout 120 python3 -m pytest -q -m gpu -p no:cacheprovider tests 2>&1 | tee "$OUT/gpu-tests.txt" | tail -6
LEFT=$((END - $(date +%s)))
echo "# bench_gpu: $LEFT s left"
timeout "$LEFT" python3 benchmarks/bench_gpu.py --device cuda --data-root "$S/data" \
  --budget-s $((LEFT - 75)) --out "$OUT/bench_gpu.json" 2>&1 | tee "$OUT/bench_gpu.txt" | grep -v "^# done"
if ! grep -q "^| dataset" "$OUT/bench_gpu.txt" && [ -f "$OUT/bench_gpu.json" ]; then
  echo "# stopped at the deadline; the cells done so far:"
  python3 benchmarks/bench_gpu.py --table-from "$OUT/bench_gpu.json"
fi
echo "# total $(( $(date +%s) - T0 )) s"
