#!/usr/bin/env bash
# One command for a machine with a CUDA GPU: self-check, GPU tests, training, benchmark.
#
#   OUT=/some/dir bash scripts/gpu_check.sh        # default OUT: ./gpu_check_out
#
# The machine's own python3 and torch run everything. Packages it lacks (mujoco, mujoco-warp,
# warp-lang, hydra-core, ...) come from the offline bundle of scripts/gpu_bundle.sh, carried in
# the same call as $BUNDLE (default .gpu_bundle/bundle): it is installed into $BUNDLE_TARGET
# (default /tmp/unilab_gpu_site) and used through PYTHONPATH. The bundle's warp.so loads NVRTC
# (libnvrtc.so.13) from the machine: its folder (torch's nvidia/cu13/lib, else the CUDA
# toolkit's) goes on LD_LIBRARY_PATH, and the check stops with one line before any CUDA work
# when it is not there. Nothing is fetched from the network.
#
# Blocks, in this order so that a run cut short still has the key facts (gpu_check.json after
# every block: CUDA usable, capture works, replay == eager, no sync in replay, env-steps/s at
# 4096 envs), each with a time budget in seconds:
#   0 environment (90): CUDA, versions, and whether Triton can build (a C compiler and Python
#     headers); without them everything below runs without torch.compile (one warning line);
#   1 doctor (180): unilab-doctor on g1_tracking at 4096 envs, eager terms (a cold Warp kernel
#     cache is paid here): capture, capture id, replay == eager, no sync in replay, speed, phases;
#   2 gpu_tests (120): pytest -m gpu with UNILAB_REQUIRE_GPU=1 (unusable CUDA fails, never skips);
#   3 train (100): FlashSAC on G1 tracking at 4096 envs, compiled agent and env, captured step;
#   4 bench_capture_{on,off} (35 each): the tracking step at 1024 / 4096 / 8192 envs;
#   5 dist_* (only with more than one GPU);
# at most GPU_CHECK_SECONDS (default 480: 8 minutes) in all, bundle install included: a block
# is cut at its budget or at that deadline, whichever comes first, and one that cannot start
# with 20 s left is recorded as skipped. LEARNING_CURVES=1 adds block 6 (a second call:
# SKIP_CHECKS=1 LEARNING_CURVES=1 runs only that one).
# Writes to $OUT: gpu_check.json, environment.txt, doctor.json, gpu_tests.xml,
# train_check.json, bench_gpu_capture_{on,off}.json, summary.txt (one line per block).
# Exits 2 if CUDA is unusable (before anything else), 3 if the bundle does not install (a
# missing or corrupted file) or lacks NVRTC on this machine, 1 if a block fails, is cut or skipped.
set -uo pipefail
cd "$(dirname "$0")/.."
START=$(date +%s)
DEADLINE=$((START + ${GPU_CHECK_SECONDS:-480}))
OUT="${OUT:-$PWD/gpu_check_out}"
mkdir -p "$OUT"
PY="${PYTHON:-python3}"
BUNDLE="${BUNDLE:-.gpu_bundle/bundle}"
status=0
: > "$OUT/summary.txt"

summarize() {  # gpu_check.json: the key facts so far, rewritten (renamed over) after every block
  if "$PY" scripts/gpu_check_facts.py summary "$OUT" > "$OUT/.gpu_check.json.tmp"; then
    mv -f "$OUT/.gpu_check.json.tmp" "$OUT/gpu_check.json"
  else
    echo "gpu_check: gpu_check.json not updated (see above)"
  fi
}

# The bundle carried in this call: installed into $BUNDLE_TARGET (a second run on the same
# machine finds it installed); without one, the machine's own packages.
site="${BUNDLE_TARGET:-/tmp/unilab_gpu_site}"
if [ -f "$BUNDLE/install.sh" ]; then
  if ! bash "$BUNDLE/install.sh" "$site" "$PY"; then
    echo "gpu_check: the bundle in $BUNDLE did not install; nothing else was run" | tee -a "$OUT/summary.txt"
    exit 3
  fi
  export PYTHONPATH="$PWD:$site${PYTHONPATH:+:$PYTHONPATH}"
  nvrtc=()  # nvrtc.txt: the NVRTC the bundle's warp.so is linked against (libnvrtc.so.13)
  if [ -f "$BUNDLE/nvrtc.txt" ]; then
    if ! nvrtc_dir=$("$PY" scripts/gpu_check_facts.py library "$(cat "$BUNDLE/nvrtc.txt")"); then
      echo "bundle exit=3 seconds=$(($(date +%s) - START)) nvrtc=missing target=$site" >> "$OUT/summary.txt"
      summarize
      exit 3
    fi
    export LD_LIBRARY_PATH="$nvrtc_dir${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
    nvrtc=("nvrtc=$nvrtc_dir")
  fi
  echo "bundle exit=0 seconds=$(($(date +%s) - START)) ${nvrtc[*]} target=$site" | tee -a "$OUT/summary.txt"
else
  export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"  # the machine's own packages
fi

# 0. CUDA must work: a green check of skipped GPU tests would prove nothing. Triton (torch.compile)
#    builds a C driver at first use: it needs a C compiler (CC, gcc or clang) and Python.h
#    (scripts/gpu_check_facts.py).
env_start=$(date +%s)
timeout 90 "$PY" scripts/gpu_check_facts.py environment > "$OUT/.environment.json.tmp" 2> "$OUT/environment.txt"
env_rc=$?
cat "$OUT/environment.txt"
[ -s "$OUT/.environment.json.tmp" ] && mv -f "$OUT/.environment.json.tmp" "$OUT/environment.json"
if [ $env_rc -ne 0 ]; then
  [ $env_rc -eq 124 ] && echo "gpu_check: the environment check ran past its 90 s budget"
  echo "gpu_check: CUDA is not usable here; nothing else was run" | tee -a "$OUT/summary.txt"
  summarize
  exit 2
fi
echo "environment exit=0 seconds=$(($(date +%s) - env_start)) budget=90" | tee -a "$OUT/summary.txt"
train_compile=()  # without Triton: compile=false for training, the Inductor test deselected
test_select=()
if ! "$PY" -c "import json, sys; sys.exit(not json.load(open('$OUT/environment.json'))['torch_compile'])"; then
  echo "gpu_check: WARNING: Triton cannot build here (no C compiler or Python headers, see environment.txt):" \
    "everything runs without torch.compile"
  train_compile=(compile=false)
  test_select=(-k "not inductor")
fi
summarize

block() {  # block NAME BUDGET_S COMMAND...: run within min(budget, time left), record status and seconds
  local name=$1 budget=$2 start rc left
  shift 2
  start=$(date +%s)
  left=$((DEADLINE - start))
  if [ "$left" -lt 20 ]; then
    status=1
    echo "$name exit=skipped seconds=0 budget=$budget reason=out_of_time" | tee -a "$OUT/summary.txt"
    return
  fi
  [ "$left" -lt "$budget" ] && budget=$left
  timeout "$budget" "$@"
  rc=$?
  [ $rc -eq 124 ] && echo "gpu_check: $name ran past its ${budget} s budget"
  [ $rc -ne 0 ] && status=1
  echo "$name exit=$rc seconds=$(($(date +%s) - start)) budget=$budget" | tee -a "$OUT/summary.txt"
  summarize
}

if [ "${SKIP_CHECKS:-0}" != 1 ]; then  # blocks 1-5; SKIP_CHECKS=1 runs only block 6

# 1. The key facts first: the captured tracking step at 4096 envs, eager terms (no Inductor
#    compile on a cold cache): capture (and its capture id), replay == eager over 100 steps in
#    MJWarp's deterministic mode, no sync during replay, env-steps/s against physics alone, phases.
block doctor 180 "$PY" -m unilab_gpu.cli.doctor --device cuda --tasks g1_tracking --num-envs 4096 --no-compile \
  --out "$OUT/doctor.json"

# 2. Tests marked gpu; with UNILAB_REQUIRE_GPU=1 they error instead of skipping without CUDA.
block gpu_tests 120 env UNILAB_REQUIRE_GPU=1 "$PY" -m pytest -m gpu -q -rs -p no:cacheprovider "${test_select[@]}" \
  --junitxml="$OUT/gpu_tests.xml"

# 3. FlashSAC on G1 tracking at 4096 envs (compiled agent and env, captured step); fails unless
#    updates ran and every logged loss is finite.
block train 100 "$PY" scripts/gpu_train_check.py --device cuda --num-envs 4096 --seconds 40 --max-seconds 95 \
  --out "$OUT/train_check.json" -- "${train_compile[@]}"

# 4. unilab-bench: the tracking step at 1024 / 4096 / 8192 envs with the CUDA graph on and off
#    (eager terms), physics alone in the same run, per-phase ms from events inside the graph.
#    The JSON is rewritten after every size, so a cut run keeps what it measured.
for capture in on off; do
  flags=(--out "$OUT/bench_gpu_capture_$capture.json")
  [ "$capture" = off ] && flags+=(--no-capture)
  "$PY" -c "import matplotlib" 2>/dev/null && flags+=(--plot "$OUT/bench_gpu_capture_$capture.png")
  block "bench_capture_$capture" 35 "$PY" -m unilab_gpu.cli.bench --task g1_tracking --device cuda \
    --num-envs 1024 4096 8192 --steps 50 --warmup 5 --no-compile --force "${flags[@]}"  # a rerun into the same OUT
done

# 5. Only with more than one visible GPU: data-parallel training, one rank per GPU (torchrun):
#    a short FlashSAC run on G1 tracking that must finish and checkpoint, the doctor on every rank
#    (replicas stay identical; per-rank and total step throughput), and the per-rank and total
#    training throughput of 1 rank against all of them.
gpus=$("$PY" -c "import torch; print(torch.cuda.device_count())")
if [ "$gpus" -gt 1 ]; then
  block dist_train 150 "$PY" -m torch.distributed.run --nproc_per_node="$gpus" -m unilab_gpu.cli.train \
    algo=flashsac total_env_steps=$((gpus * 1024 * 200)) env.num_envs=1024 log_every=50 export_onnx=false \
    run_dir="$OUT/dist_run" "${train_compile[@]}"
  block dist_doctor 150 "$PY" -m torch.distributed.run --nproc_per_node="$gpus" -m unilab_gpu.cli.doctor \
    --tasks pendulum --num-envs 1024 --no-compile --out "$OUT/doctor_fleet.json"
  block dist_bench 150 "$PY" scripts/bench_distributed.py --device cuda --task g1_tracking --num-envs 1024 \
    --iterations 100 --ranks 1 "$gpus" --out "$OUT/distributed_gpu.json"
fi

fi  # SKIP_CHECKS

# 6. Only with LEARNING_CURVES=1 (a second device call with GPU_CHECK_SECONDS=570: about 9
#    minutes): the learning curves of issues 10 and 13 at GPU size, G1 tracking (SAC, 4096 envs,
#    the real clip when ../shared is there) and G1 velocity (SAC, 2048 envs), each against its
#    untrained policy. Run it alone with SKIP_CHECKS=1 to skip blocks 1-5.
if [ "${LEARNING_CURVES:-0}" = 1 ]; then
  clip=()  # the built-in synthetic clip where the shared real one is not on this machine
  "$PY" -c "import sys; sys.path.insert(0, 'scripts'); import learning_curve as lc; assert lc.SHARED_CLIP.is_file()" \
    2>/dev/null || clip=(--motion none)
  block curve_tracking 270 "$PY" scripts/learning_curve.py --device cuda --algo sac --num-envs 4096 "${clip[@]}" \
    --eval-envs 1024 --clean-eval-envs 1024 --minutes 3 --log-every 50 --out "$OUT/g1_tracking_sac_gpu.json" \
    --plot "$OUT/g1_tracking_sac_gpu.png"
  block curve_velocity 270 "$PY" scripts/learning_curve.py --device cuda --task g1_velocity --algo sac_velocity \
    --num-envs 2048 --eval-envs 1024 --minutes 3 --log-every 50 --out "$OUT/g1_velocity_sac_gpu.json" \
    --plot "$OUT/g1_velocity_sac_gpu.png"
fi

echo "gpu_check: results in $OUT (exit $status, $(($(date +%s) - START)) s)"
cat "$OUT/summary.txt"
exit $status
