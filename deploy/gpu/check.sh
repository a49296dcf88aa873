#!/usr/bin/env bash
# The GPU check of agl_events.algorithm.VERL: a few verl GRPO steps on one GPU (FSDP actor, vLLM rollout
# servers) with every rollout run by our runners through Kafka. Run from the repository root:
#
#   deploy/gpu/check.sh [MODEL_DIR]      # MODEL_DIR: a local Hugging Face model (Qwen2.5-0.5B-Instruct or so);
#                                        # without one, a tiny Llama made on the spot (nothing to download)
#
# Needs the gpu extra (pip install -e '.[gpu]': verl, vLLM and the torch vLLM pins), Java 17 and the broker's
# jars (make install fetches them). A machine without network must have them already: the script installs
# the extra only when pip can reach an index. Exit 0: trained; 3: the stack is missing (says what).
set -euo pipefail
cd "$(dirname "$0")/../.."
PY=${AGL_GPU_PYTHON:-.venv/bin/python}
stack='import torch, verl, vllm; assert torch.cuda.is_available(), "no CUDA GPU visible"'
if ! "$PY" -c "$stack" 2>/dev/null; then
  echo "gpu check: installing the gpu extra"
  timeout 300 "$PY" -m pip install -q -e '.[gpu]' || true
  if ! "$PY" -c "$stack"; then
    echo "gpu check: needs verl, vllm and a CUDA GPU for $PY (pip install -e '.[gpu]')"; exit 3
  fi
fi
export AGL_HOME=${AGL_HOME:-$PWD/.agl/gpu} AGL_KAFKA_PORT=${AGL_KAFKA_PORT:-39092}
export AGL_KAFKA_CONTROLLER_PORT=${AGL_KAFKA_CONTROLLER_PORT:-39093} LITELLM_LOCAL_MODEL_COST_MAP=True
"$PY" -m agl_events kafka start
trap '"$PY" -m agl_events kafka stop' EXIT
"$PY" -c "import torch, verl, vllm; print('gpu check:', torch.cuda.get_device_name(0), 'torch', torch.__version__, 'verl', verl.__version__, 'vllm', vllm.__version__)"
timeout "${AGL_GPU_TIMEOUT:-540}" "$PY" deploy/gpu/smoke.py "$@"
