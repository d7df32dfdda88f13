#!/usr/bin/env bash
# Every GPU check in one run, for a lent GPU machine (../shared/gpu/README.md): the GPU suite, then the
# GPU benchmark on CoNLL-2003. Logs go under $OUT (default runs/device_checks).
#   bash ../shared/gpu/bundle.sh                                  # here: packs .gpu/
#   bash .gpu/run.sh bash tests/gpu/device_checks.sh              # there, with .gpu carried
set -u
OUT=${OUT:-runs/device_checks}
mkdir -p "$OUT"
nvidia-smi > "$OUT/nvidia-smi.txt" 2>&1
python3 -c "import torch; print(torch.__version__, torch.version.cuda, torch.cuda.get_device_name(0))" | tee "$OUT/torch.txt"
timeout 240 python3 -m pytest -q -n 8 -rs --durations=10 tests/gpu > "$OUT/gpu_suite.log" 2>&1
echo "GPU suite: rc=$?"; tail -15 "$OUT/gpu_suite.log"
NERZOO_DATA=conll2003 timeout 330 python3 benchmarks/speed/gpu_training.py --data conll2003 \
  --budget 290 --max-sentences 4000 --json "$OUT/gpu_training.json" > "$OUT/gpu_training.log" 2>&1
echo "GPU benchmark: rc=$?"; tail -40 "$OUT/gpu_training.log"
