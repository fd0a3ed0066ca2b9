#!/usr/bin/env bash
# One command for a machine with a CUDA GPU: every key fact of the project on it, in one cold run.
#
#   OUT=/some/dir bash scripts/gpu_check.sh        # default OUT: ./gpu_check_out
#
# The machine's own python3 and torch run everything. Packages it lacks (mujoco, mujoco-warp,
# warp-lang, hydra-core, ...) come from the offline bundle of scripts/gpu_bundle.sh, carried in
# the same call as $BUNDLE (default .gpu_bundle/bundle): it is installed into $BUNDLE_TARGET
# (default /tmp/unilab_gpu_site) and used through PYTHONPATH. The bundle's warp.so loads NVRTC
# (libnvrtc.so.13) from the machine: its folder (torch's nvidia/cu13/lib, else the CUDA
# toolkit's) goes on LD_LIBRARY_PATH, and the check stops with one line before any CUDA work
# when it is not there. Warp hands the driver CUBINs (UNILAB_WARP_CUDA_OUTPUT=cubin, the path
# the bundle was checked on). Nothing is fetched from the network.
#
# Blocks, in the order that yields the key facts first, each with a budget in seconds:
#   0 environment (90; seconds on an idle machine): CUDA usable, versions, and proof that Triton
#     builds and launches a kernel (else with TRITON_LIBCUDA_PATH set to links to the loaded
#     libcuda, else compile=false below), one line;
#   1 warm (70): the Warp modules of the doctor's runs compiled in parallel processes;
#   2 doctor (130): g1_tracking at 4096 envs, eager terms: physics alone, capture, replay == eager
#     over steps with resets, no sync in replay, captured vs physics alone, the solver A/B, audits;
#   3 bench_capture (35): the captured step against physics alone at 1024 / 4096 / 8192 envs;
#   4 gpu_tests (70): pytest -m gpu with UNILAB_REQUIRE_GPU=1 (unusable CUDA fails, never skips);
#   5 compile (55): torch.compile tried only now, the compiled step at 4096 envs (skipped without
#     Triton);
#   6 train (55): FlashSAC on G1 tracking at 4096 envs, captured step, compiled if block 5 passed;
#   6b train_update (60): the update at 4096 envs, eager vs compiled vs captured (bench_gpu_update.json);
#   7 dist_* (only with more than one GPU); 8 learning curves and the tracking policy's full-clip
#     evaluation (LEARNING_CURVES=1, a second call); 9 generated terrain in the captured step
#     (ROUGH=1 with SKIP_CHECKS=1, a call of its own); 10 the Go2 learning on rough terrain and its
#     clean slopes-and-stairs evaluation (ROUGH_LEARNING=1 with SKIP_CHECKS=1, a call of its own).
# At most GPU_CHECK_SECONDS (default 480: 8 minutes) in all, bundle install included. Every block
# writes its JSON as it goes. A block is cut at its budget or at the deadline, whichever comes
# first: it gets SIGINT (pytest writes its report, the doctor marks the check it was in) and,
# GPU_CHECK_GRACE (default 10) seconds later, SIGKILL; one that cannot start with
# GPU_CHECK_MIN_BLOCK (default 20) seconds left is skipped. gpu_check.json (the key facts so far)
# is rewritten after every block, and when the check itself is stopped.
# Writes to $OUT: gpu_check.json, environment.{json,txt}, warm.json, doctor.json,
# bench_gpu_capture.json, gpu_tests.xml, bench_gpu_compiled.json, train_check.json, bench_gpu_update.json (block 9:
# warm_rough.json, doctor_rough.json, bench_gpu_rough.json; block 10: warm_rough_learning.json,
# go2_velocity_rough_sac_gpu.{json,png}, go2_rough_gpu_run/, go2_velocity_rough_gpu_terrain_eval.json),
# summary.txt
# (one line per block: exit=N, or exit=cut_budget / cut_deadline / killed, or skipped).
# Exit status: 0 every block passed; 1 a block failed; 4 none failed but one was cut or skipped
# for want of time; 2 CUDA is unusable (before anything else); 3 the bundle does not install (a
# missing or corrupted file) or lacks NVRTC on this machine.
#
# GPU_CHECK_REHEARSAL=1 runs this control flow on any machine with every block's program replaced
# by scripts/gpu_check_stub.py (no CUDA, no bundle; GPU_CHECK_STUB says which block hangs, fails
# or ignores SIGINT; GPU_CHECK_BUDGETS="NAME=SECONDS ..." overrides budgets):
# tests/test_gpu_check_rehearsal.py cuts it at chosen points.
set -uo pipefail
cd "$(dirname "$0")/.."
START=$(date +%s)
DEADLINE=$((START + ${GPU_CHECK_SECONDS:-480}))
GRACE=${GPU_CHECK_GRACE:-10}
MIN_BLOCK=${GPU_CHECK_MIN_BLOCK:-20}
REHEARSAL=${GPU_CHECK_REHEARSAL:-0}
OUT="${OUT:-$PWD/gpu_check_out}"
mkdir -p "$OUT"
PY="${PYTHON:-python3}"
BUNDLE="${BUNDLE:-.gpu_bundle/bundle}"
export UNILAB_WARP_CUDA_OUTPUT="${UNILAB_WARP_CUDA_OUTPUT:-cubin}"
failed=0  # a block exited non-zero on its own
short=0   # a block was cut or skipped for want of time
: > "$OUT/summary.txt"

summarize() {  # gpu_check.json: the key facts so far, rewritten (renamed over) after every block
  if "$PY" scripts/gpu_check_facts.py summary "$OUT" > "$OUT/.gpu_check.json.tmp"; then
    mv -f "$OUT/.gpu_check.json.tmp" "$OUT/gpu_check.json"
  else
    echo "gpu_check: gpu_check.json not updated (see above)"
  fi
}
# Stopped from outside (the device call's own limit): the running block gets SIGINT (and SIGKILL
# GPU_CHECK_GRACE seconds later), then the facts so far still reach gpu_check.json.
running=""  # the timeout process of the running block; blocks run in the background so that the
            # shell's `wait` returns at once when a signal comes (a foreground child defers traps)
stopped() {
  echo "gpu_check: stopped from outside" | tee -a "$OUT/summary.txt"
  if [ -n "$running" ]; then
    kill -INT "$running" 2>/dev/null
    wait "$running"
  fi
  summarize
  exit 4
}
trap stopped INT TERM

program() {  # program NAME COMMAND...: sets cmd to the block's command, or its stand-in in a rehearsal
  local name=$1
  shift
  cmd=("$@")
  [ "$REHEARSAL" = 1 ] && cmd=("$PY" scripts/gpu_check_stub.py "$name" -- "$@")
  return 0
}

# The bundle carried in this call: installed into $BUNDLE_TARGET (a second run on the same
# machine finds it installed); without one, the machine's own packages.
site="${BUNDLE_TARGET:-/tmp/unilab_gpu_site}"
if [ "$REHEARSAL" != 1 ] && [ -f "$BUNDLE/install.sh" ]; then
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

block() {  # block NAME BUDGET COMMAND...: run within min(budget, time left), SIGINT first; record what happened
  local name=$1 budget=$2 start rc left what item
  shift 2
  for item in ${GPU_CHECK_BUDGETS:-}; do  # NAME=SECONDS overrides (rehearsals cut blocks with them)
    [ "${item%%=*}" = "$name" ] && budget=${item#*=}
  done
  start=$(date +%s)
  left=$((DEADLINE - start - GRACE))
  if [ "$left" -lt "$MIN_BLOCK" ]; then
    short=1
    echo "$name exit=skipped seconds=0 budget=$budget reason=out_of_time" | tee -a "$OUT/summary.txt"
    return 0
  fi
  local cut=cut_budget
  if [ "$left" -lt "$budget" ]; then budget=$left; cut=cut_deadline; fi
  program "$name" "$@"
  timeout -s INT -k "$GRACE" "$budget" "${cmd[@]}" &
  running=$!
  wait "$running"
  rc=$?
  running=""
  case $rc in
    0) what=0 ;;
    124) what=$cut; short=1; echo "gpu_check: $name was cut at ${budget} s (SIGINT)" ;;
    137) what=killed; short=1; echo "gpu_check: $name was cut at ${budget} s and killed ${GRACE} s later" ;;
    *) what=$rc; failed=1 ;;
  esac
  echo "$name exit=$what seconds=$(($(date +%s) - start)) budget=$budget" | tee -a "$OUT/summary.txt"
  summarize
  return "$rc"
}

# 0. CUDA must work: a green check of skipped GPU tests would prove nothing. Triton (torch.compile)
#    must build and launch a kernel, else everything below runs without torch.compile.
env_start=$(date +%s)
program environment "$PY" scripts/gpu_check_facts.py environment "$OUT/.libcuda"
timeout -k "$GRACE" 90 "${cmd[@]}" > "$OUT/.environment.json.tmp" 2> "$OUT/environment.txt"
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
fact() {  # fact KEY: a value of environment.json ("" for null)
  "$PY" -c "import json, sys; v = json.load(open(sys.argv[1])).get(sys.argv[2]); print('' if v is None else v)" \
    "$OUT/environment.json" "$1"
}
triton=$(fact torch_compile)
libcuda=$(fact triton_libcuda_path)
[ -n "$libcuda" ] && export TRITON_LIBCUDA_PATH="$libcuda"
test_select=()  # without Triton: the Inductor test deselected
[ "$triton" = True ] || test_select=(-k "not inductor")
gpus=$(fact devices)
summarize

workers=$(( $(nproc) < 8 ? $(nproc) : 8 ))  # parallel Warp compiles of the warm blocks
if [ "${SKIP_CHECKS:-0}" != 1 ]; then  # blocks 1-7; SKIP_CHECKS=1 runs only blocks 8 to 10

# 1. Warp's modules of the doctor's runs, compiled in parallel processes into the kernel cache.
block warm 70 "$PY" -m unilab_gpu.doctor.warm --device cuda --task g1_tracking --num-envs 4096 \
  --workers "$workers" --out "$OUT/warm.json"

# 2. The key facts: physics alone at 4096 envs, the captured step (eager terms), replay == eager
#    over 100 steps with resets in MJWarp's deterministic mode, no sync during replay, captured vs
#    physics alone, phases, the solver's early-exit A/B; then the host-sync audits.
block doctor 130 "$PY" -m unilab_gpu.cli.doctor --device cuda --tasks g1_tracking --num-envs 4096 \
  --no-compile --out "$OUT/doctor.json"

# 3. unilab-bench: the captured step against physics alone in the same run, at 1024 / 4096 / 8192
#    envs, eager terms; its JSON is rewritten after every size.
block bench_capture 35 "$PY" -m unilab_gpu.cli.bench --task g1_tracking --device cuda \
  --num-envs 1024 4096 8192 --steps 50 --warmup 5 --no-compile --force --out "$OUT/bench_gpu_capture.json"

# 4. Tests marked gpu; with UNILAB_REQUIRE_GPU=1 they error instead of skipping without CUDA.
block gpu_tests 70 env UNILAB_REQUIRE_GPU=1 "$PY" -m pytest -m gpu -q -rs -p no:cacheprovider \
  "${test_select[@]}" --junitxml="$OUT/gpu_tests.xml"

# 5. torch.compile, tried after the key facts: the compiled, captured step at 4096 envs.
train_compile=(compile=false)
if [ "$triton" = True ]; then
  block compile 55 "$PY" -m unilab_gpu.cli.bench --task g1_tracking --device cuda \
    --num-envs 4096 --steps 50 --warmup 5 --force --out "$OUT/bench_gpu_compiled.json" && train_compile=()
else  # the environment line said why; not a failure of this check
  echo "compile exit=skipped seconds=0 budget=55 reason=no_triton" | tee -a "$OUT/summary.txt"
fi

# 6. FlashSAC on G1 tracking at 4096 envs (captured step; compiled if block 5 passed); fails
#    unless updates ran and every logged loss is finite.
block train 55 "$PY" scripts/gpu_train_check.py --device cuda --num-envs 4096 --seconds 20 \
  --max-seconds 50 --force --out "$OUT/train_check.json" -- "${train_compile[@]}"

# 6b. (issue 49) The update beside the captured step, FlashSAC at 4096 envs: update ms and training
#     env-steps/s, eager against compiled (if block 5 passed) and captured (scripts/bench_update.py).
update_modes=(eager captured_eager)
[ ${#train_compile[@]} -eq 0 ] && update_modes=(eager compiled captured)
block train_update 60 "$PY" scripts/bench_update.py --device cuda --presets gpu --modes "${update_modes[@]}" \
  --warm-updates 4 --updates 20 --blocks 3 --iterations 5 --force --out "$OUT/bench_gpu_update.json"

# 7. Only with more than one visible GPU: data-parallel training, the doctor on every rank and the
#    training throughput of 1 rank against all of them.
if [ "${gpus:-1}" -gt 1 ]; then
  block dist_train 150 "$PY" -m torch.distributed.run --nproc_per_node="$gpus" \
    -m unilab_gpu.cli.train algo=flashsac total_env_steps=$((gpus * 1024 * 200)) env.num_envs=1024 log_every=50 \
    export_onnx=false run_dir="$OUT/dist_run" "${train_compile[@]}"
  block dist_doctor 150 "$PY" -m torch.distributed.run --nproc_per_node="$gpus" \
    -m unilab_gpu.cli.doctor --tasks pendulum --num-envs 1024 --no-compile --out "$OUT/doctor_fleet.json"
  block dist_bench 150 "$PY" scripts/bench_distributed.py --device cuda --task g1_tracking \
    --num-envs 1024 --iterations 100 --ranks 1 "$gpus" --force --out "$OUT/distributed_gpu.json"
fi

fi  # SKIP_CHECKS

# 8. Only with LEARNING_CURVES=1 (a second device call with GPU_CHECK_SECONDS=570: about 9
#    minutes): the learning curves of issues 10 and 13 at GPU size, G1 tracking (SAC, 4096 envs,
#    the real clip when ../shared is there) and G1 velocity (SAC, 2048 envs), each against its
#    untrained policy, and the trained tracking policy's full-clip evaluation (unilab-eval, 1024
#    trials from frame 0 and 1024 from spread starts: success rates, MPKPE, R-MPKPE, joint and
#    end-effector errors). Run it alone with SKIP_CHECKS=1 to skip blocks 1-7.
if [ "${LEARNING_CURVES:-0}" = 1 ]; then
  clip=()  # the built-in synthetic clip where the shared real one is not on this machine
  "$PY" -c "import sys; sys.path.insert(0, 'scripts'); import learning_curve as lc; assert lc.SHARED_CLIP.is_file()" \
    2>/dev/null || clip=(--motion none)
  rm -rf "$OUT/g1_tracking_sac_gpu_run"  # --keep-run wants a new folder; this one is the check's own
  block curve_tracking 270 "$PY" scripts/learning_curve.py --device cuda --algo sac \
    --num-envs 4096 "${clip[@]}" --eval-envs 1024 --clean-eval-envs 1024 --minutes 3 --log-every 50 \
    --keep-run "$OUT/g1_tracking_sac_gpu_run" \
    --force --out "$OUT/g1_tracking_sac_gpu.json" --plot "$OUT/g1_tracking_sac_gpu.png"
  block eval_tracking 60 "$PY" -m unilab_gpu.cli.eval "$OUT/g1_tracking_sac_gpu_run" --device cuda --trials 1024 \
    --force --out "$OUT/g1_tracking_sac_gpu_eval.json"
  block curve_velocity 230 "$PY" scripts/learning_curve.py --device cuda \
    --task g1_velocity --algo sac_velocity --num-envs 2048 --eval-envs 1024 --minutes 2.5 --log-every 50 \
    --force --out "$OUT/g1_velocity_sac_gpu.json" --plot "$OUT/g1_velocity_sac_gpu.png"
fi

# 9. Only with ROUGH=1 (a call of its own with SKIP_CHECKS=1, about 5 minutes): generated terrain
#    inside the captured step. The doctor's physics, capture, replay == eager (with resets, so the
#    curriculum and the spawn on origins run in the graph) and no-sync checks on go2_velocity_rough
#    at 4096 envs, both rough tasks' step audits on CUDA, and unilab-bench's captured rough step
#    against physics alone on the same terrain and on flat ground at 1024 / 4096 envs.
if [ "${ROUGH:-0}" = 1 ]; then
  block warm_rough 70 "$PY" -m unilab_gpu.doctor.warm --device cuda --task go2_velocity_rough --num-envs 4096 \
    --workers "$workers" --out "$OUT/warm_rough.json"
  block doctor_rough 150 "$PY" -m unilab_gpu.cli.doctor --device cuda --capture-task go2_velocity_rough \
    --tasks go2_velocity_rough g1_velocity_rough --num-envs 4096 --no-compile --out "$OUT/doctor_rough.json"
  block bench_rough 60 "$PY" -m unilab_gpu.cli.bench --task go2_velocity_rough --device cuda \
    --num-envs 1024 4096 --steps 50 --warmup 5 --no-compile --force --out "$OUT/bench_gpu_rough.json"
fi

# 10. Only with ROUGH_LEARNING=1 (a call of its own with SKIP_CHECKS=1, about 8 minutes): issue 32's
#     learning target at GPU size. The Go2 on the default rough grid (SAC, 4096 envs, 3.5 minutes),
#     its mean terrain level over training, then the clean evaluation on 15 degree slopes and 10 cm
#     stairs, up and down (unilab-eval --terrain slopes_stairs_eval, 256 rows per sub-terrain). The
#     run folder comes back in $OUT: the machine has no onnx or onnxruntime, so unilab-export and
#     unilab-sim2sim run on the CPU machine from its checkpoint (docs/gpu_check.md).
if [ "${ROUGH_LEARNING:-0}" = 1 ]; then
  rm -rf "$OUT/go2_rough_gpu_run"  # --keep-run wants a new folder; this one is the check's own
  block warm_rough_learning 70 "$PY" -m unilab_gpu.doctor.warm --device cuda --task go2_velocity_rough \
    --num-envs 4096 --workers "$workers" --out "$OUT/warm_rough_learning.json"
  block curve_rough 320 "$PY" scripts/learning_curve.py --device cuda --task go2_velocity_rough --algo sac_velocity \
    --num-envs 4096 --eval-envs 1024 --minutes 3.5 --log-every 50 --keep-run "$OUT/go2_rough_gpu_run" \
    --force --out "$OUT/go2_velocity_rough_sac_gpu.json" --plot "$OUT/go2_velocity_rough_sac_gpu.png"
  block eval_rough 60 "$PY" -m unilab_gpu.cli.eval "$OUT/go2_rough_gpu_run" --device cuda \
    --terrain slopes_stairs_eval --rows-per-column 256 --force --out "$OUT/go2_velocity_rough_gpu_terrain_eval.json"
fi

summarize  # the skipped blocks too
status=0
[ $short -eq 1 ] && status=4
[ $failed -eq 1 ] && status=1
echo "gpu_check: results in $OUT (exit $status, $(($(date +%s) - START)) s)"
cat "$OUT/summary.txt"
exit $status
