#!/usr/bin/env bash
# One command for a machine with a CUDA GPU: every key fact of the project on it, in one cold run.
#
#   OUT=/some/dir bash scripts/gpu_check.sh        # default OUT: ./gpu_check_out (of the caller)
#   bash scripts/gpu_check.sh --plan               # the blocks this call would run, their budgets
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
# Blocks, in the order that yields the key facts first, each with a budget in seconds (the table
# BUDGET below; the default call's add up to 480 of its 500, the bundle's install counted):
#   bundle (40): install.sh of the carried bundle;
#   0 environment (50): CUDA usable, versions, and proof that Triton builds and launches a kernel
#     (else with TRITON_LIBCUDA_PATH set to links to the loaded libcuda, else compile=false below);
#     the probe's tries share the budget, less 5 s: a probe that runs out is reported as such;
#   1 warm (45): the Warp modules of the doctor's runs compiled in parallel processes;
#   2 doctor (100): g1_tracking at 4096 envs, eager terms: physics alone, capture, replay == eager
#     over steps with resets, no sync in replay, captured vs physics alone, the solver A/B, audits;
#   3 bench_capture (35): the captured step against physics alone at 8192, then 4096 envs;
#   4 gpu_tests (40): pytest -m gpu with UNILAB_REQUIRE_GPU=1 (unusable CUDA fails, never skips);
#   5 compiled_eager (60): the compiled step == the eager one on CUDA, g1_tracking then
#     go2_velocity_rough at 1024 envs (skipped without Triton);
#   6 train (110): one compiled training run (FlashSAC, G1 tracking, 4096 envs, captured step):
#     its throughput is the fact (eager only without Triton);
#   7 dist_* (DIST=1 with SKIP_CHECKS=1, more than one GPU, a call of its own); 8 learning curves
#     and the tracking policy's full-clip evaluation (LEARNING_CURVES=1, a call of its own);
#     9 generated terrain in the captured step (ROUGH=1, a call of its own); 10 the Go2 learning on
#     rough terrain and its clean slopes-and-stairs evaluation (ROUGH_LEARNING=1, a call of its own);
#     11 the learner's update at 4096 envs, eager vs compiled vs captured (UPDATE=1, a call of its own).
# At most GPU_CHECK_SECONDS (default 500; 570 for the calls of blocks 7, 8 and 10) in all, bundle
# install included. A block is cut at its budget or at the deadline, whichever comes first: it
# gets SIGINT (pytest writes its report, the doctor marks the check it was in, the learning curve
# writes its curve so far) and, GPU_CHECK_GRACE (default 10) seconds later, SIGKILL; one that
# cannot start with GPU_CHECK_MIN_BLOCK (default 20) seconds left is skipped.
#
# The blocks write into a working folder, GPU_CHECK_WORK (default a new /tmp/unilab_gpu_check.*),
# and after every block $OUT gets, each renamed over atomically (the device machine returns at
# most 8 files, two folders down): gpu_check.json (the key facts so far), summary.txt (one line per
# block: exit=N, or exit=cut_budget / cut_deadline / killed, or skipped), gpu_check_details.tar.gz
# (every block's own files: environment.{json,txt}, warm.json, doctor.json, bench_gpu_capture.json,
# gpu_tests.xml, compiled_eager.json, train_check.json, and blocks 7-10's reports and plots) and,
# when a block kept a run folder, gpu_check_runs.tar.gz (those folders). The key facts also go to
# stdout, one per line, at the end and when the check is stopped from outside.
# Exit status: 0 every block passed; 1 a block failed; 4 none failed but one was cut or skipped
# for want of time; 2 CUDA is unusable, or block 0 could not tell within its budget (before
# anything else); 3 the bundle does not install (a missing or corrupted file, or past its budget)
# or lacks NVRTC on this machine; 5 a setting is wrong (one line names the variable).
#
# GPU_CHECK_REHEARSAL=1 runs this control flow on any machine with every block's program replaced
# by scripts/gpu_check_stub.py (no CUDA, no bundle; GPU_CHECK_STUB says which block hangs, fails
# or ignores SIGINT; GPU_CHECK_BUDGETS="NAME=SECONDS ..." overrides budgets):
# tests/test_gpu_check_rehearsal.py cuts it at chosen points.
set -uo pipefail
CALLER=$PWD  # relative OUT and GPU_CHECK_WORK are the caller's
cd "$(dirname "$0")/.."

declare -A BUDGET=(  # seconds, by block
  [bundle]=40 [environment]=50
  [warm]=45 [doctor]=100 [bench_capture]=35 [gpu_tests]=40 [compiled_eager]=60 [train]=110
  [dist_train]=150 [dist_doctor]=150 [dist_bench]=150
  [curve_tracking]=230 [eval_tracking]=50 [curve_velocity]=190
  [warm_rough]=60 [doctor_rough]=150 [bench_rough]=60
  [warm_rough_learning]=50 [curve_rough]=310 [eval_rough]=60 [eval_rough_heights]=50
  [train_update]=150
)

refuse() {  # a wrong setting: one line naming it and what is expected, exit 5
  echo "gpu_check: $1" >&2
  exit 5
}
seconds_setting() {  # seconds_setting NAME VALUE MIN: a whole number of seconds >= MIN, or refuse
  [[ $2 =~ ^[0-9]+$ ]] && [ "$2" -ge "$3" ] ||
    refuse "$1 must be a whole number of seconds >= $3, got '$2'"
}
TOTAL=${GPU_CHECK_SECONDS:-500}
seconds_setting GPU_CHECK_SECONDS "$TOTAL" 1
GRACE=${GPU_CHECK_GRACE:-10}
seconds_setting GPU_CHECK_GRACE "$GRACE" 1
MIN_BLOCK=${GPU_CHECK_MIN_BLOCK:-20}
seconds_setting GPU_CHECK_MIN_BLOCK "$MIN_BLOCK" 1
for item in ${GPU_CHECK_BUDGETS:-}; do  # NAME=SECONDS overrides (rehearsals cut blocks with them)
  name=${item%%=*}
  [ -n "$name" ] && [ "$name" != "$item" ] && [ -n "${BUDGET[$name]+set}" ] ||
    refuse "GPU_CHECK_BUDGETS: '$item' must be NAME=SECONDS with NAME one of: $(printf '%s\n' "${!BUDGET[@]}" | sort | xargs)"
  seconds_setting "GPU_CHECK_BUDGETS's $name" "${item#*=}" 1
  BUDGET[$name]=${item#*=}
done
for flag in GPU_CHECK_REHEARSAL SKIP_CHECKS DIST LEARNING_CURVES ROUGH ROUGH_LEARNING UPDATE; do
  case ${!flag:-0} in 0 | 1) ;; *) refuse "$flag must be 0 or 1, got '${!flag}'" ;; esac
done
REHEARSAL=${GPU_CHECK_REHEARSAL:-0}

PLAN=0
case "${1:-}" in
  "") ;;
  --plan) PLAN=1 ;;
  *) refuse "unknown argument '$1'; expected none or --plan" ;;
esac
if [ $PLAN = 1 ]; then  # the blocks this call runs with their budgets, and its deadline; nothing runs
  PY=python3 WORK=WORK  # placeholders in the command lines, which --plan does not run
  echo "deadline $TOTAL"
  echo "bundle ${BUDGET[bundle]}"
  echo "environment ${BUDGET[environment]}"
fi

START=$(date +%s)
DEADLINE=$((START + TOTAL))
if [ $PLAN = 0 ]; then
  PY="${PYTHON:-python3}"
  "$PY" -c 'import sys; sys.exit(sys.version_info < (3, 10))' 2>/dev/null ||
    refuse "PYTHON=$PY does not run as a Python 3.10 or newer interpreter; set PYTHON to one (default python3)"
  OUT="${OUT:-gpu_check_out}"
  [[ $OUT = /* ]] || OUT="$CALLER/$OUT"
  mkdir -p "$OUT" 2>/dev/null && [ -w "$OUT" ] || refuse "OUT=$OUT cannot be made a writable folder"
  OUT=$(cd "$OUT" && pwd -P)
  WORK="${GPU_CHECK_WORK:-$(mktemp -d "${TMPDIR:-/tmp}/unilab_gpu_check.XXXXXX")}"
  [[ $WORK = /* ]] || WORK="$CALLER/$WORK"
  mkdir -p "$WORK" 2>/dev/null && [ -w "$WORK" ] || refuse "GPU_CHECK_WORK=$WORK cannot be made a writable folder"
  WORK=$(cd "$WORK" && pwd -P)
  case "$WORK/" in "$OUT"/*) refuse "GPU_CHECK_WORK=$WORK is inside OUT=$OUT; the working folder must lie outside it" ;; esac
  BUNDLE="${BUNDLE:-.gpu_bundle/bundle}"
  export UNILAB_WARP_CUDA_OUTPUT="${UNILAB_WARP_CUDA_OUTPUT:-cubin}"
  : > "$WORK/summary.txt"
  echo "gpu_check: working folder $WORK; results in $OUT"
fi
failed=0  # a block exited non-zero on its own
short=0   # a block was cut or skipped for want of time

note() {  # note LINE: a line of summary.txt, also on stdout
  echo "$1" | tee -a "$WORK/summary.txt"
}
publish() {  # $OUT: gpu_check.json (the key facts so far), summary.txt and the blocks' files, each renamed over
  if "$PY" scripts/gpu_check_facts.py summary "$WORK" > "$OUT/.gpu_check.json.tmp"; then
    mv -f "$OUT/.gpu_check.json.tmp" "$OUT/gpu_check.json"
  else
    echo "gpu_check: gpu_check.json not updated (see above)"
  fi
  cp "$WORK/summary.txt" "$OUT/.summary.txt.tmp" && mv -f "$OUT/.summary.txt.tmp" "$OUT/summary.txt"
  local runs=() folder
  for folder in "$WORK"/*_run; do [ -d "$folder" ] && runs+=("${folder##*/}"); done
  tar -czf "$OUT/.details.tmp" -C "$WORK" --exclude='./.*' --exclude='./*_run' . &&
    mv -f "$OUT/.details.tmp" "$OUT/gpu_check_details.tar.gz"
  if [ ${#runs[@]} -gt 0 ]; then
    tar -czf "$OUT/.runs.tmp" -C "$WORK" "${runs[@]}" && mv -f "$OUT/.runs.tmp" "$OUT/gpu_check_runs.tar.gz"
  fi
}
key_facts() {  # the key facts on stdout, one per line (the device call's output comes back in any case)
  "$PY" scripts/gpu_check_facts.py brief "$OUT/gpu_check.json" 2>/dev/null
}
# Stopped from outside (the device call's own limit): the running block gets SIGINT (and SIGKILL
# GPU_CHECK_GRACE seconds later), then the facts so far still reach $OUT.
running=""  # the timeout process of the running block; blocks run in the background so that the
            # shell's `wait` returns at once when a signal comes (a foreground child defers traps)
stopped() {
  note "gpu_check: stopped from outside"
  if [ -n "$running" ]; then
    kill -INT "$running" 2>/dev/null
    wait "$running"
  fi
  publish
  key_facts
  exit 4
}
[ $PLAN = 0 ] && trap stopped INT TERM

program() {  # program NAME COMMAND...: sets cmd to the block's command, or its stand-in in a rehearsal
  local name=$1
  shift
  cmd=("$@")
  [ "$REHEARSAL" = 1 ] && cmd=("$PY" scripts/gpu_check_stub.py "$name" -- "$@")
  return 0
}

# The bundle carried in this call: installed into $BUNDLE_TARGET (a second run on the same
# machine finds it installed); without one, the machine's own packages.
if [ $PLAN = 0 ]; then
  site="${BUNDLE_TARGET:-/tmp/unilab_gpu_site}"
  if [ "$REHEARSAL" != 1 ] && [ -f "$BUNDLE/install.sh" ]; then
    timeout -k "$GRACE" "${BUDGET[bundle]}" bash "$BUNDLE/install.sh" "$site" "$PY"
    rc=$?
    if [ $rc -ne 0 ]; then
      [ $rc -eq 124 ] && echo "gpu_check: the bundle's install ran past its ${BUDGET[bundle]} s budget"
      note "gpu_check: the bundle in $BUNDLE did not install; nothing else was run"
      publish
      exit 3
    fi
    export PYTHONPATH="$PWD:$site${PYTHONPATH:+:$PYTHONPATH}"
    nvrtc=()  # nvrtc.txt: the NVRTC the bundle's warp.so is linked against (libnvrtc.so.13)
    if [ -f "$BUNDLE/nvrtc.txt" ]; then
      if ! nvrtc_dir=$("$PY" scripts/gpu_check_facts.py library "$(cat "$BUNDLE/nvrtc.txt")"); then
        echo "bundle exit=3 seconds=$(($(date +%s) - START)) nvrtc=missing target=$site" >> "$WORK/summary.txt"
        publish
        exit 3
      fi
      export LD_LIBRARY_PATH="$nvrtc_dir${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
      nvrtc=("nvrtc=$nvrtc_dir")
    fi
    note "bundle exit=0 seconds=$(($(date +%s) - START)) ${nvrtc[*]} target=$site"
  else
    export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"  # the machine's own packages
  fi
fi

block() {  # block NAME COMMAND...: run within min(budget, time left), SIGINT first; record what happened
  local name=$1 budget=${BUDGET[$1]} start rc left what
  shift
  if [ $PLAN = 1 ]; then
    echo "$name $budget"
    return 0
  fi
  start=$(date +%s)
  left=$((DEADLINE - start - GRACE))
  if [ "$left" -lt "$MIN_BLOCK" ]; then
    short=1
    note "$name exit=skipped seconds=0 budget=$budget reason=out_of_time"
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
  note "$name exit=$what seconds=$(($(date +%s) - start)) budget=$budget"
  publish
  return "$rc"
}
skip() {  # skip NAME REASON: a block this machine cannot run (not a failure of the check)
  [ $PLAN = 1 ] && return 0
  note "$1 exit=skipped seconds=0 budget=${BUDGET[$1]} reason=$2"
}

# 0. CUDA must work: a green check of skipped GPU tests would prove nothing. Triton (torch.compile)
#    must build and launch a kernel, else everything below runs without torch.compile.
triton=True gpus=2  # what --plan assumes: every block runs
if [ $PLAN = 0 ]; then
  env_start=$(date +%s)
  env_budget=${BUDGET[environment]}
  program environment "$PY" scripts/gpu_check_facts.py environment "$WORK/.libcuda" "$env_budget"
  timeout -s INT -k "$GRACE" "$env_budget" "${cmd[@]}" > "$WORK/.environment.json.tmp" 2> "$WORK/environment.txt"
  env_rc=$?
  cat "$WORK/environment.txt"
  [ -s "$WORK/.environment.json.tmp" ] && mv -f "$WORK/.environment.json.tmp" "$WORK/environment.json"
  if [ $env_rc -ne 0 ]; then
    if [ $env_rc -eq 124 ] || [ $env_rc -eq 137 ]; then
      note "environment exit=cut_budget seconds=$(($(date +%s) - env_start)) budget=$env_budget"
      note "gpu_check: block 0 ran past its $env_budget s budget before it could tell whether CUDA is usable (an import, CUDA's or Warp's start hung; the Triton probe has its own limit inside); nothing else was run"
    else
      note "gpu_check: CUDA is not usable here; nothing else was run"
    fi
    publish
    key_facts
    exit 2
  fi
  note "environment exit=0 seconds=$(($(date +%s) - env_start)) budget=$env_budget"
  fact() {  # fact KEY: a value of environment.json ("" for null)
    "$PY" -c "import json, sys; v = json.load(open(sys.argv[1])).get(sys.argv[2]); print('' if v is None else v)" \
      "$WORK/environment.json" "$1"
  }
  triton=$(fact torch_compile)
  libcuda=$(fact triton_libcuda_path)
  [ -n "$libcuda" ] && export TRITON_LIBCUDA_PATH="$libcuda"
  gpus=$(fact devices)
  publish
fi
test_select=()  # without Triton: the Inductor test deselected
[ "$triton" = True ] || test_select=(-k "not inductor")
train_compile=()  # compiled (train.yaml's compile=auto) unless Triton cannot build
[ "$triton" = True ] || train_compile=(compile=false)

workers=$(( $(nproc) < 8 ? $(nproc) : 8 ))  # parallel Warp compiles of the warm blocks
if [ "${SKIP_CHECKS:-0}" != 1 ]; then  # blocks 1-6; SKIP_CHECKS=1 runs only blocks 7 to 10

# 1. Warp's modules of the doctor's runs, compiled in parallel processes into the kernel cache.
block warm "$PY" -m unilab_gpu.doctor.warm --device cuda --task g1_tracking --num-envs 4096 \
  --workers "$workers" --out "$WORK/warm.json"

# 2. The key facts: physics alone at 4096 envs, the captured step (eager terms), replay == eager
#    over 100 steps with resets in MJWarp's deterministic mode, no sync during replay, captured vs
#    physics alone, phases, the solver's early-exit A/B; then the host-sync audits.
block doctor "$PY" -m unilab_gpu.cli.doctor --device cuda --tasks g1_tracking --num-envs 4096 \
  --no-compile --out "$WORK/doctor.json"

# 3. unilab-bench: the captured step against physics alone in the same run, 8192 envs first (the
#    size a cut would lose), then 4096; eager terms; its JSON is rewritten after every size.
block bench_capture "$PY" -m unilab_gpu.cli.bench --task g1_tracking --device cuda \
  --num-envs 8192 4096 --steps 50 --warmup 5 --no-compile --force --out "$WORK/bench_gpu_capture.json"

# 4. Tests marked gpu; with UNILAB_REQUIRE_GPU=1 they error instead of skipping without CUDA.
block gpu_tests env UNILAB_REQUIRE_GPU=1 "$PY" -m pytest -m gpu -q -rs -p no:cacheprovider \
  "${test_select[@]}" --junitxml="$WORK/gpu_tests.xml"

# 5. torch.compile on CUDA, before the compiled training run: the compiled step equals the eager
#    one on a flat task and on a terrain task (Inductor writes Triton kernels here, C++ on a CPU).
if [ "$triton" = True ]; then
  block compiled_eager "$PY" -m unilab_gpu.doctor.compiled_eager --device cuda \
    --tasks g1_tracking go2_velocity_rough --num-envs 1024 --steps 30 --out "$WORK/compiled_eager.json"
else  # the environment line said why; not a failure of this check
  skip compiled_eager no_triton
fi

# 6. One compiled training run (FlashSAC on G1 tracking at 4096 envs, captured step): its
#    throughput after the first logging window (which holds the cold compile and the capture) is
#    the fact; it ends on its own before the budget (--max-seconds) and writes at every logging
#    point. Fails unless updates ran and every logged loss is finite.
train_limit=$((BUDGET[train] > 30 ? BUDGET[train] - 15 : BUDGET[train] / 2))  # ends on its own, and writes
block train "$PY" scripts/gpu_train_check.py --device cuda --num-envs 4096 --seconds 30 \
  --max-seconds "$train_limit" --force --out "$WORK/train_check.json" -- "${train_compile[@]}"

fi  # SKIP_CHECKS

# 7. Only with DIST=1 (a call of its own with SKIP_CHECKS=1 and GPU_CHECK_SECONDS=570) and more
#    than one visible GPU: data-parallel training, the doctor on every rank and the training
#    throughput of 1 rank against all of them.
if [ "${DIST:-0}" = 1 ]; then
  if [ "${gpus:-1}" -gt 1 ]; then
    block dist_train "$PY" -m torch.distributed.run --nproc_per_node="$gpus" \
      -m unilab_gpu.cli.train algo=flashsac total_env_steps=$((gpus * 1024 * 200)) env.num_envs=1024 log_every=50 \
      export_onnx=false run_dir="$WORK/dist_run" "${train_compile[@]}"
    block dist_doctor "$PY" -m torch.distributed.run --nproc_per_node="$gpus" \
      -m unilab_gpu.cli.doctor --tasks pendulum --num-envs 1024 --no-compile --out "$WORK/doctor_fleet.json"
    block dist_bench "$PY" scripts/bench_distributed.py --device cuda --task g1_tracking \
      --num-envs 1024 --iterations 100 --ranks 1 "$gpus" --force --out "$WORK/distributed_gpu.json"
  else
    for name in dist_train dist_doctor dist_bench; do skip "$name" one_gpu; done
  fi
fi

# 8. Only with LEARNING_CURVES=1 (a call of its own with SKIP_CHECKS=1 and GPU_CHECK_SECONDS=570):
#    the learning curves of issues 10 and 13 at GPU size, G1 tracking (SAC, 4096 envs, the real
#    clip when ../shared is there) and G1 velocity (SAC, 2048 envs), each against its untrained
#    policy, and the trained tracking policy's full-clip evaluation (unilab-eval, 1024 trials from
#    frame 0 and 1024 from spread starts: success rates, MPKPE, R-MPKPE, joint and end-effector
#    errors). A cut curve keeps its points (learning_curve.py writes as it goes and on SIGINT).
if [ "${LEARNING_CURVES:-0}" = 1 ]; then
  clip=()  # the built-in synthetic clip where the shared real one is not on this machine
  [ $PLAN = 1 ] || "$PY" -c "import sys; sys.path.insert(0, 'scripts'); import learning_curve as lc; assert lc.SHARED_CLIP.is_file()" \
    2>/dev/null || clip=(--motion none)
  [ $PLAN = 1 ] || rm -rf "$WORK/g1_tracking_sac_gpu_run"  # --keep-run wants a new folder; this one is the check's own
  block curve_tracking "$PY" scripts/learning_curve.py --device cuda --algo sac \
    --num-envs 4096 "${clip[@]}" --eval-envs 1024 --clean-eval-envs 1024 --minutes 2.5 --log-every 50 \
    --keep-run "$WORK/g1_tracking_sac_gpu_run" \
    --force --out "$WORK/g1_tracking_sac_gpu.json" --plot "$WORK/g1_tracking_sac_gpu.png"
  block eval_tracking "$PY" -m unilab_gpu.cli.eval "$WORK/g1_tracking_sac_gpu_run" --device cuda --trials 1024 \
    --force --out "$WORK/g1_tracking_sac_gpu_eval.json"
  block curve_velocity "$PY" scripts/learning_curve.py --device cuda \
    --task g1_velocity --algo sac_velocity --num-envs 2048 --eval-envs 1024 --minutes 2 --log-every 50 \
    --force --out "$WORK/g1_velocity_sac_gpu.json" --plot "$WORK/g1_velocity_sac_gpu.png"
fi

# 9. Only with ROUGH=1 (a call of its own with SKIP_CHECKS=1, about 5 minutes): generated terrain
#    inside the captured step. The doctor's physics, capture, replay == eager (with resets, so the
#    curriculum and the spawn on origins run in the graph), no-sync and solver A/B checks on
#    go2_velocity_rough at 4096 envs, both rough tasks' step audits on CUDA, and unilab-bench's
#    captured rough step against physics alone on the same terrain and on flat ground at 1024 /
#    4096 envs.
if [ "${ROUGH:-0}" = 1 ]; then
  block warm_rough "$PY" -m unilab_gpu.doctor.warm --device cuda --task go2_velocity_rough --num-envs 4096 \
    --workers "$workers" --out "$WORK/warm_rough.json"
  block doctor_rough "$PY" -m unilab_gpu.cli.doctor --device cuda --capture-task go2_velocity_rough \
    --tasks go2_velocity_rough g1_velocity_rough --num-envs 4096 --no-compile --out "$WORK/doctor_rough.json"
  block bench_rough "$PY" -m unilab_gpu.cli.bench --task go2_velocity_rough --device cuda \
    --num-envs 1024 4096 --steps 50 --warmup 5 --no-compile --force --out "$WORK/bench_gpu_rough.json"
fi

# 10. Only with ROUGH_LEARNING=1 (a call of its own with SKIP_CHECKS=1 and GPU_CHECK_SECONDS=570):
#     issue 32's learning target at GPU size, with issue 48's best CPU setting (heading commands, the
#     policy's own height scan: go2_velocity_rough_scan, no demotion on time-outs, promotion at 0.8
#     of the asked distance).
#     The Go2 on the default rough grid (SAC, 4096 envs, 3.5 minutes), its mean terrain level over
#     training, then the clean evaluation on 15 degree
#     slopes and 10 cm stairs, up and down (unilab-eval --terrain slopes_stairs_eval, 256 rows per
#     sub-terrain), and up and down stairs of 4, 6, 8 and 10 cm risers (stairs_heights_eval, 128
#     rows each): the riser at which it stops. The run folder comes back in gpu_check_runs.tar.gz
#     for unilab-export and unilab-sim2sim (docs/gpu_check.md).
if [ "${ROUGH_LEARNING:-0}" = 1 ]; then
  [ $PLAN = 1 ] || rm -rf "$WORK/go2_rough_gpu_run"  # --keep-run wants a new folder; this one is the check's own
  block warm_rough_learning "$PY" -m unilab_gpu.doctor.warm --device cuda --task go2_velocity_rough_scan \
    --num-envs 4096 --workers "$workers" --out "$WORK/warm_rough_learning.json"
  block curve_rough "$PY" scripts/learning_curve.py --device cuda --task go2_velocity_rough_scan --algo sac_velocity \
    --num-envs 4096 --eval-envs 1024 --minutes 3.5 --log-every 50 --keep-run "$WORK/go2_rough_gpu_run" \
    --env-override commands.twist.params.heading_fraction=1.0 \
    --env-override terrain.curriculum.demote_on_time_out=false --env-override terrain.curriculum.promote_ratio=0.8 \
    --force --out "$WORK/go2_velocity_rough_sac_gpu.json" --plot "$WORK/go2_velocity_rough_sac_gpu.png"
  block eval_rough "$PY" -m unilab_gpu.cli.eval "$WORK/go2_rough_gpu_run" --device cuda \
    --terrain slopes_stairs_eval --rows-per-column 256 --force --out "$WORK/go2_velocity_rough_gpu_terrain_eval.json"
  block eval_rough_heights "$PY" -m unilab_gpu.cli.eval "$WORK/go2_rough_gpu_run" --device cuda \
    --terrain stairs_heights_eval --rows-per-column 128 --force --out "$WORK/go2_velocity_rough_gpu_stairs_heights_eval.json"
fi

# 11. Only with UPDATE=1 (a call of its own with SKIP_CHECKS=1): issue 49's update beside the
#     captured step, FlashSAC at 4096 envs: update ms and training env-steps/s, eager against
#     compiled and captured (algo.capture_update); without Triton eager against captured-uncompiled.
if [ "${UPDATE:-0}" = 1 ]; then
  update_modes=(eager compiled captured)
  [ $PLAN = 1 ] || "$PY" -c 'import triton' 2>/dev/null || update_modes=(eager captured_eager)
  block train_update "$PY" scripts/bench_update.py --device cuda --presets gpu --modes "${update_modes[@]}" \
    --warm-updates 4 --updates 20 --blocks 3 --iterations 5 --force --out "$WORK/bench_gpu_update.json"
fi

[ $PLAN = 1 ] && exit 0
publish  # the skipped blocks too
status=0
[ $short -eq 1 ] && status=4
[ $failed -eq 1 ] && status=1
echo "gpu_check: results in $OUT (exit $status, $(($(date +%s) - START)) s)"
cat "$WORK/summary.txt"
key_facts
exit $status
