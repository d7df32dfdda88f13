#!/usr/bin/env bash
# Every GPU check, for a lent GPU machine (../shared/gpu/README.md): the GPU benchmark on CoNLL-2003
# (the GPU recipes included), the GPU suite, and cuda_graphs over 4 epochs (`levers`). Logs go under $OUT (default runs/device_checks).
#   make gpu-bundle                                               # here: packs .gpu/
#   bash .gpu/run.sh bash tests/gpu/device_checks.sh [first] [benchmark] [suite] [levers]   # there, .gpu carried
# A lent machine goes back 30 s after a call and a session has 15 minutes of device time, so one call
# of at most 600 s is what a session can count on: `first` (the default) runs the suite, then the
# benchmark in the time left (the rows not yet measured on a GPU first). On an H200: suite ~120 s,
# benchmark ~200 s before it timed the GPU recipe of deptree_ner, batches of 512 and the cuda_graphs
# rows (alone at most 420 s), levers ~100 s.
set -u
OUT=${OUT:-runs/device_checks}
STAGES=${*:-first}
mkdir -p "$OUT"
# spaCy parses made here for deptree_ner's files (keyed by content), so that the GPU machine need not parse;
# made by `NERZOO_CACHE=$PWD/.gpu/cache .venv/bin/python benchmarks/speed/gpu_training.py --rows deptree_ner
# --precisions float32 --epochs 1 --max-sentences 4000` here (about 30 s).
[ -d .gpu/cache ] && export NERZOO_CACHE=$PWD/.gpu/cache
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader  # at most 8 files come back from $OUT
python3 -c "import torch; print(torch.__version__, torch.version.cuda, torch.cuda.get_device_name(0))"
BENCH="python3 benchmarks/speed/gpu_training.py --data conll2003 --max-sentences 4000"
suite() {  # $1: seconds
  timeout "$1" python3 -m pytest -v -n 8 --dist loadgroup -p no:benchmark --timeout 150 --durations=10 -rfEs tests/gpu > "$OUT/gpu_suite.log" 2>&1
  echo "GPU suite: rc=$?"; tail -25 "$OUT/gpu_suite.log"
}
benchmark() {  # $1: seconds, $2: the rows, in the order they run; rows that would start in the last 60 s are skipped
  timeout "$1" $BENCH --rows "$2" --budget $(($1 - 60)) --json "$OUT/gpu_training.json" > "$OUT/gpu_training.log" 2>&1
  echo "GPU benchmark: rc=$? ($1 s)"; grep -A30 '^row ' "$OUT/gpu_training.log" || tail -30 "$OUT/gpu_training.log"
}
case " $STAGES " in *" first "*)
  # Within one call of 600 s: the suite, then the benchmark until 570 s from this script's start.
  suite 230
  benchmark $((570 - SECONDS)) crf_tagger,bilstm_crf,bilstm_crf_gpu,deptree_ner,deptree_ner_gpu,bilstm_crf+cuda_graphs;;
esac
case " $STAGES " in *" benchmark "*)
  benchmark 450 bilstm_crf,bilstm_crf_gpu,deptree_ner,deptree_ner_gpu,crf_tagger,bilstm_crf+cuda_graphs;;
esac
case " $STAGES " in *" suite "*)
  suite 265;;
esac
case " $STAGES " in *" levers "*)
  # bilstm_crf's recipe with cuda_graphs over 4 epochs: the first captures the graphs
  timeout 100 $BENCH --rows bilstm_crf+cuda_graphs --precisions float32 --epochs 4 --predict-batch-sizes 64 --budget 85 \
    > "$OUT/cuda_graphs.log" 2>&1
  echo "cuda_graphs, 4 epochs: rc=$?"; grep -A2 '^row ' "$OUT/cuda_graphs.log";;
esac
