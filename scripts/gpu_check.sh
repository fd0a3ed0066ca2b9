#!/usr/bin/env bash
# One command for a machine with a CUDA GPU: the GPU tests and a short benchmark, results to $OUT.
#
#   OUT=/some/dir bash scripts/gpu_check.sh        # default OUT: ./gpu_check_out
#
# Installs nothing from the network. Python packages that the machine lacks (mujoco, mujoco-warp,
# warp-lang, hydra-core) can travel as wheels in ./.whl/ and are installed from there offline.
# Takes under 8 minutes on one H200: tests and physics bench ~3 min, env bench <= 2 min,
# training check <= 2.5 min.
set -uo pipefail
cd "$(dirname "$0")/.."
OUT="${OUT:-$PWD/gpu_check_out}"
mkdir -p "$OUT"
PY="${PYTHON:-python3}"
status=0

if [ -d .whl ]; then
  "$PY" -m pip install --quiet --no-index --find-links .whl mujoco mujoco-warp warp-lang hydra-core \
    2>&1 | tail -n 3
fi
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"

"$PY" - <<'PY' | tee "$OUT/environment.txt"
import torch, warp as wp, mujoco, mujoco_warp
print("torch", torch.__version__, "cuda", torch.version.cuda, "device", torch.cuda.get_device_name(0))
print("warp", wp.__version__, "driver", wp.get_cuda_driver_version(), "mujoco", mujoco.__version__,
      "mujoco_warp", mujoco_warp.__version__)
PY

# 1. Tests marked gpu (capture equals eager, no host sync during replay, ...).
"$PY" -m pytest -m gpu -q -rs --junitxml="$OUT/gpu_tests.xml" 2>&1 | tee "$OUT/gpu_tests.log" || status=1

# 2. Physics-only throughput, captured as one CUDA graph.
"$PY" scripts/bench_physics.py --device cuda --num-envs 1024 4096 8192 --steps 200 \
  --out "$OUT/physics_gpu.json" 2>&1 | tail -n 5 || status=1

# 3. unilab-bench: the whole env step with the CUDA graph on and off (eager phases, so no
#    torch.compile time), per-phase ms from events inside the graph. <= 2 minutes in all:
#    each run is cut at 60 s; the JSON and PNG are rewritten after every size.
bench_task=g1_tracking
[ -f configs/task/g1_tracking.yaml ] || bench_task=g1_stand
for capture in on off; do
  flags=(--out "$OUT/bench_gpu_capture_$capture.json")
  [ "$capture" = off ] && flags+=(--no-capture)
  "$PY" -c "import matplotlib" 2>/dev/null && flags+=(--plot "$OUT/bench_gpu_capture_$capture.png")
  timeout 60 "$PY" -m unilab_gpu.bench --task "$bench_task" --device cuda --num-envs 1024 4096 8192 \
    --steps 50 --warmup 5 --no-compile "${flags[@]}" 2>&1 | grep -v "^Module " | tail -n 8 || status=1
done

# 4. FlashSAC training on G1 tracking at 4096 envs (compiled agent and env, captured step):
#    75 s of training after the first logging window (torch.compile + capture), <= 150 s in
#    all; env-steps/s, update ms and the reward trend in train_check.json.
timeout 170 "$PY" scripts/gpu_train_check.py --device cuda --num-envs 4096 --seconds 75 --max-seconds 150 \
  --out "$OUT/train_check.json" 2>&1 | grep -v "^Module " | tail -n 5 || status=1

echo "gpu_check: results in $OUT (exit $status)"
exit $status
