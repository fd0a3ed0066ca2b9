#!/usr/bin/env bash
# One command for a machine with a CUDA GPU: self-check, GPU tests, benchmark, short training.
#
#   OUT=/some/dir bash scripts/gpu_check.sh        # default OUT: ./gpu_check_out
#
# Writes to $OUT: environment.txt, doctor.json, gpu_tests.xml, bench_gpu_capture_{on,off}.json,
# train_check.json, and summary.txt (one line per block with its exit status and seconds);
# LEARNING_CURVES=1 adds the GPU-sized learning curves (block 6), SKIP_CHECKS=1 skips blocks 1-5:
#   OUT=/some/dir SKIP_CHECKS=1 LEARNING_CURVES=1 bash scripts/gpu_check.sh
# Installs nothing from the network; Python packages the machine lacks (mujoco, mujoco-warp,
# warp-lang, hydra-core) can travel as wheels in ./.whl/ and are installed from there offline.
#
# Time budgets (seconds, each block is cut at its budget; a cold Warp + Triton kernel cache is
# paid in the doctor block, the first to build a G1 env): doctor 180, tests 150, bench 2 x 45,
# training 120; at most 540 s in all (9 minutes).
# Exits non-zero if CUDA is unusable (before anything else) or if any block fails or times out.
set -uo pipefail
cd "$(dirname "$0")/.."
OUT="${OUT:-$PWD/gpu_check_out}"
mkdir -p "$OUT"
PY="${PYTHON:-python3}"
status=0
: > "$OUT/summary.txt"

if [ -d .whl ]; then
  "$PY" -m pip install --quiet --no-index --find-links .whl mujoco mujoco-warp warp-lang hydra-core \
    2>&1 | tail -n 3
fi
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"

# 0. CUDA must work: a green check of skipped GPU tests would prove nothing.
if ! "$PY" - <<'PY' 2>&1 | tee "$OUT/environment.txt"; then
import sys
import torch, warp as wp, mujoco, mujoco_warp
if not torch.cuda.is_available():
    sys.exit(f"gpu_check: FAILED: torch {torch.__version__} (CUDA build {torch.version.cuda}) sees no CUDA device")
x = torch.ones(1, device="cuda") + 1  # a real launch, not just a device count
torch.cuda.synchronize()
print("torch", torch.__version__, "cuda", torch.version.cuda, "devices", torch.cuda.device_count(),
      torch.cuda.get_device_name(0))
print("warp", wp.__version__, "driver", wp.get_cuda_driver_version(), "mujoco", mujoco.__version__,
      "mujoco_warp", mujoco_warp.__version__)
PY
  echo "gpu_check: CUDA is not usable here; nothing else was run" | tee -a "$OUT/summary.txt"
  exit 2
fi

block() {  # block NAME BUDGET_S COMMAND...: run with a time limit, record status and seconds
  local name=$1 budget=$2 start rc
  shift 2
  start=$(date +%s)
  timeout "$budget" "$@"
  rc=$?
  [ $rc -eq 124 ] && echo "gpu_check: $name ran past its ${budget} s budget"
  [ $rc -ne 0 ] && status=1
  echo "$name exit=$rc seconds=$(( $(date +%s) - start )) budget=$budget" | tee -a "$OUT/summary.txt"
}

if [ "${SKIP_CHECKS:-0}" != 1 ]; then  # blocks 1-5; SKIP_CHECKS=1 runs only block 6

# 1. unilab-doctor: capture, replay == eager (deterministic), no sync in replay, speed and phases.
block doctor 180 "$PY" -m unilab_gpu.cli.doctor --device cuda --out "$OUT/doctor.json"

# 2. Tests marked gpu; with UNILAB_REQUIRE_GPU=1 they error instead of skipping without CUDA.
block gpu_tests 150 env UNILAB_REQUIRE_GPU=1 "$PY" -m pytest -m gpu -q -rs -p no:cacheprovider \
  --junitxml="$OUT/gpu_tests.xml"

# 3. unilab-bench: the tracking step at 1024 / 4096 / 8192 envs with the CUDA graph on and off
#    (eager terms: no torch.compile time), physics alone in the same run, per-phase ms from events
#    inside the graph. The JSON is rewritten after every size, so a cut run keeps what it measured.
for capture in on off; do
  flags=(--out "$OUT/bench_gpu_capture_$capture.json")
  [ "$capture" = off ] && flags+=(--no-capture)
  "$PY" -c "import matplotlib" 2>/dev/null && flags+=(--plot "$OUT/bench_gpu_capture_$capture.png")
  block "bench_capture_$capture" 45 "$PY" -m unilab_gpu.cli.bench --task g1_tracking --device cuda \
    --num-envs 1024 4096 8192 --steps 50 --warmup 5 --no-compile "${flags[@]}"
done

# 4. Two minutes of FlashSAC on G1 tracking at 4096 envs (compiled agent and env, captured step);
#    fails unless updates ran and every logged loss is finite.
block train 120 "$PY" scripts/gpu_train_check.py --device cuda --num-envs 4096 --seconds 45 --max-seconds 110 \
  --out "$OUT/train_check.json"

# 5. Only with more than one visible GPU: data-parallel training, one rank per GPU (torchrun):
#    a short FlashSAC run on G1 tracking that must finish and checkpoint, the doctor on every rank
#    (replicas stay identical; per-rank and total step throughput), and the per-rank and total
#    training throughput of 1 rank against all of them.
gpus=$("$PY" -c "import torch; print(torch.cuda.device_count())")
if [ "$gpus" -gt 1 ]; then
  block dist_train 150 "$PY" -m torch.distributed.run --nproc_per_node="$gpus" -m unilab_gpu.cli.train \
    algo=flashsac total_env_steps=$((gpus * 1024 * 200)) env.num_envs=1024 log_every=50 export_onnx=false \
    run_dir="$OUT/dist_run"
  block dist_doctor 150 "$PY" -m torch.distributed.run --nproc_per_node="$gpus" -m unilab_gpu.cli.doctor \
    --tasks pendulum --num-envs 1024 --no-compile --out "$OUT/doctor_fleet.json"
  block dist_bench 150 "$PY" scripts/bench_distributed.py --device cuda --task g1_tracking --num-envs 1024 \
    --iterations 100 --ranks 1 "$gpus" --out "$OUT/distributed_gpu.json"
fi

fi  # SKIP_CHECKS

# 6. Only with LEARNING_CURVES=1 (a second device call: it adds about 9 minutes): the learning
#    curves of issues 10 and 13 at GPU size, G1 tracking (SAC, 4096 envs, the real clip when
#    ../shared is there) and G1 velocity (SAC, 2048 envs), each against its untrained policy.
#    Run it alone with SKIP_CHECKS=1 to skip blocks 1-5.
if [ "${LEARNING_CURVES:-0}" = 1 ]; then
  clip=()  # the built-in synthetic clip where the shared real one is not on this machine
  "$PY" -c "import sys; sys.path.insert(0, 'scripts'); import learning_curve as lc; assert lc.SHARED_CLIP.is_file()" \
    2>/dev/null || clip=(--motion none)
  block curve_tracking 270 "$PY" scripts/learning_curve.py --device cuda --algo sac --num-envs 4096 "${clip[@]}" \
    --eval-envs 1024 --minutes 3 --log-every 50 --out "$OUT/g1_tracking_sac_gpu.json" --plot "$OUT/g1_tracking_sac_gpu.png"
  block curve_velocity 270 "$PY" scripts/learning_curve.py --device cuda --task g1_velocity --algo sac_velocity \
    --num-envs 2048 --eval-envs 1024 --minutes 3 --log-every 50 --out "$OUT/g1_velocity_sac_gpu.json" \
    --plot "$OUT/g1_velocity_sac_gpu.png"
fi

echo "gpu_check: results in $OUT (exit $status)"
cat "$OUT/summary.txt"
exit $status
