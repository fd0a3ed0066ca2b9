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
# One call (the default, 480 s, bundle install included) returns every key fact, in this order:
#   bundle (40): install.sh of the carried bundle;
#   0 environment (40): CUDA usable, versions, and proof that Triton builds and launches a kernel
#     (else with TRITON_LIBCUDA_PATH set to links to the loaded libcuda, else compile=false in
#     every block below: block 0's proof decides, never `import triton`); the probe's tries share
#     the budget, less 5 s: a probe that runs out is reported as such;
#   1 warm (45): the Warp modules of the doctor's runs compiled in parallel processes;
#   2 doctor (90): g1_tracking at 4096 envs, eager terms: physics alone, capture, replay == eager
#     over steps with resets, no sync in replay, captured vs physics alone, the solver A/B, audits;
#     capture_rough (60): the same capture checks on go2_velocity_rough at 1024 envs (the terrain
#     task's first CUDA compile happens and is checked here);
#   3 update_tests (35): the captured update == the uncaptured one from the same state (pytest -m
#     gpu tests/test_rl_gpu.py with UNILAB_REQUIRE_GPU=1: unusable CUDA fails, never skips);
#   4 bench_capture (30): the captured step against physics alone at 8192, then 4096 envs;
#   5 train (95): one compiled training run (FlashSAC, G1 tracking, 4096 envs, captured step and
#     update): its throughput after the first captured replay is the fact;
#   6 gpu_tests (30): the rest of pytest -m gpu.
# Optional further calls, each a call of its own with SKIP_CHECKS=1, only if the device time left
# (status's budget_left_s) covers the `--plan` line needs_budget_left_s (docs/gpu_check.md):
#   ROUGH=1: 9 generated terrain in the captured step at 4096 envs, and compiled == eager on CUDA;
#   UPDATE=1: 11 the learner's update at 4096 envs, eager vs compiled vs captured;
#   DANCE_LEARNING=1: 12 the G1 learning the dance clip of holosoma's ONNX policy, and its
#     full-clip evaluation (skipped when ../shared/peers is not there);
#   ROUGH_LEARNING=1: 10 the Go2 learning on rough terrain and its clean evaluations;
#   LEARNING_CURVES=1: 8 the learning curves; DIST=1: 7 dist_* (more than one GPU).
# At most GPU_CHECK_SECONDS (default 480) in all, bundle install included. A block is cut at its
# budget or at the deadline, whichever comes first: it gets SIGINT (pytest writes its report, the
# doctor marks the check it was in, the learning curve writes its curve so far) and,
# GPU_CHECK_GRACE (default 10) seconds later, SIGKILL; one that cannot start with
# GPU_CHECK_MIN_BLOCK (default 20) seconds left is skipped.
#
# The blocks write into a working folder, GPU_CHECK_WORK (default a new /tmp/unilab_gpu_check.*),
# and after every block $OUT gets, each renamed over atomically (the device machine returns at
# most 8 files of 16 MiB, two folders down): gpu_check.json (the key facts so far), summary.txt
# (one line per block: exit=N, or exit=cut_budget / cut_deadline / killed, exit=cut_short (a
# program that stopped itself for want of time: exit status 75), or skipped),
# gpu_check_details.tar.gz (every block's own files) and, when a block kept a run folder,
# gpu_check_runs.tar.gz (those folders). A file over 15 MiB comes as NAME.part0, NAME.part1, ...
# (`cat NAME.part* > NAME` joins them). The key facts also go to stdout, one per line, at the end
# and when the check is stopped from outside.
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
  [bundle]=40 [environment]=40
  [warm]=45 [doctor]=90 [capture_rough]=60 [update_tests]=35 [bench_capture]=30 [train]=95 [gpu_tests]=30
  [dist_train]=150 [dist_doctor]=150 [dist_bench]=150
  [curve_tracking]=230 [eval_tracking]=50 [curve_velocity]=190
  [warm_rough]=60 [doctor_rough]=150 [bench_rough]=60 [compiled_eager]=60
  [warm_rough_learning]=50 [curve_rough]=310 [eval_rough]=60 [eval_rough_heights]=50
  [warm_update]=30 [train_update]=120
  [dance_clip]=20 [warm_dance]=40 [curve_dance]=250 [eval_dance]=60
)
WARM_MACHINE=30  # seconds of device time a further call needs beyond its deadline: the files' return
                 # (on the machine still warm from the last call; a fresh one's start adds a minute or two)


refuse() {  # a wrong setting: one line naming it and what is expected, exit 5
  echo "gpu_check: $1" >&2
  exit 5
}
seconds_setting() {  # seconds_setting NAME VALUE MIN: a whole number of seconds >= MIN, or refuse
  [[ $2 =~ ^[0-9]+$ ]] && [ "$2" -ge "$3" ] ||
    refuse "$1 must be a whole number of seconds >= $3, got '$2'"
}
TOTAL=${GPU_CHECK_SECONDS:-480}
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
for flag in GPU_CHECK_REHEARSAL SKIP_CHECKS DIST LEARNING_CURVES ROUGH ROUGH_LEARNING UPDATE DANCE_LEARNING; do
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
  echo "needs_budget_left_s $((TOTAL + WARM_MACHINE))"
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
    place "$OUT/.details.tmp" gpu_check_details.tar.gz
  # The run folders (tens of MB) are packed again only when one changed since the last packing.
  if [ ${#runs[@]} -gt 0 ] && { [ ! -e "$WORK/.runs_packed" ] ||
    [ -n "$(cd "$WORK" && find "${runs[@]}" -newer .runs_packed -print -quit)" ]; }; then
    touch "$WORK/.runs_packing"
    tar -czf "$OUT/.runs.tmp" -C "$WORK" "${runs[@]}" && place "$OUT/.runs.tmp" gpu_check_runs.tar.gz &&
      mv -f "$WORK/.runs_packing" "$WORK/.runs_packed"
  fi
}
PART_BYTES=$((15 * 1024 * 1024))  # the device machine returns no file of 16 MiB or more
place() {  # place TMP NAME: TMP becomes $OUT/NAME, or NAME.part0, NAME.part1, ... (cat joins them) over 15 MiB
  local part new=()
  if [ "$(stat -c %s "$1")" -le "$PART_BYTES" ]; then
    mv -f "$1" "$OUT/$2" && rm -f "$OUT/$2".part*
    return
  fi
  rm -f "$1".part?
  split -b "$PART_BYTES" -d -a 1 "$1" "$1.part" && rm -f "$1" || return 1
  for part in "$1".part?; do
    new+=("$OUT/$2.${part##*.}")
    mv -f "$part" "${new[-1]}"
  done
  rm -f "$OUT/$2"
  for part in "$OUT/$2".part?; do  # parts of an earlier, longer archive
    [[ " ${new[*]} " == *" $part "* ]] || rm -f "$part"
  done
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
    75) what=cut_short; short=1; echo "gpu_check: $name stopped itself before it could measure (cut short, not failed)" ;;
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
update_tests="captured_updates or each_phase or failed_warm_up"  # tests/test_rl_gpu.py's captured-update tests
no_triton=""  # without Triton: the Inductor tests and compiled variants deselected
[ "$triton" = True ] || no_triton=" and not inductor and not compiled"
train_compile=()  # compiled (train.yaml's compile=auto) unless block 0 could not prove Triton
[ "$triton" = True ] || train_compile=(compile=false)
gpu_pytest=(env UNILAB_REQUIRE_GPU=1 "$PY" -m pytest -m gpu -q -rs -p no:cacheprovider)

workers=$(( $(nproc) < 8 ? $(nproc) : 8 ))  # parallel Warp compiles of the warm blocks
if [ "${SKIP_CHECKS:-0}" != 1 ]; then  # the default call; SKIP_CHECKS=1 runs only the further calls' blocks

# 1. Warp's modules of the doctor's runs, compiled in parallel processes into the kernel cache.
block warm "$PY" -m unilab_gpu.doctor.warm --device cuda --task g1_tracking --num-envs 4096 \
  --workers "$workers" --out "$WORK/warm.json"

# 2. The key facts: physics alone at 4096 envs, the captured step (eager terms), replay == eager
#    over 100 steps with resets in MJWarp's deterministic mode, no sync during replay, captured vs
#    physics alone, phases, the solver's early-exit A/B; then the host-sync audits.
block doctor "$PY" -m unilab_gpu.cli.doctor --device cuda --tasks g1_tracking --num-envs 4096 \
  --no-compile --out "$WORK/doctor.json"
#    The same on generated terrain (go2_velocity_rough, 1024 envs): its first CUDA compile, the
#    curriculum and the spawn on sub-terrain origins inside the graph, replay == eager, no sync.
block capture_rough "$PY" -m unilab_gpu.cli.doctor --device cuda --capture-task go2_velocity_rough \
  --tasks go2_velocity_rough --num-envs 1024 --no-compile --out "$WORK/capture_rough.json"

# 3. The captured update against the uncaptured one from the same state (its uncompiled variants
#    first), its warm-up runs and their failure, first of the GPU tests.
block update_tests "${gpu_pytest[@]}" -k "($update_tests)$no_triton" tests/test_rl_gpu.py \
  --junitxml="$WORK/update_tests.xml"

# 4. unilab-bench: the captured step against physics alone in the same run, 8192 envs first (the
#    size a cut would lose), then 4096; eager terms; its JSON is rewritten after every size.
block bench_capture "$PY" -m unilab_gpu.cli.bench --task g1_tracking --device cuda \
  --num-envs 8192 4096 --steps 50 --warmup 5 --no-compile --force --out "$WORK/bench_gpu_capture.json"

# 5. One compiled training run (FlashSAC on G1 tracking at 4096 envs, captured step and update):
#    its throughput, timed after the first captured replay (compile and capture before it), is the
#    fact; it ends on its own before the budget (--max-seconds), logs every 10 iterations and
#    writes at every logging point. A stop before a steady window is a cut, not a failure.
train_limit=$((BUDGET[train] > 30 ? BUDGET[train] - 15 : BUDGET[train] / 2))  # ends on its own, and writes
block train "$PY" scripts/gpu_train_check.py --device cuda --num-envs 4096 --seconds 30 --log-every 10 \
  --max-seconds "$train_limit" --force --out "$WORK/train_check.json" -- algo.capture_update=true "${train_compile[@]}"

# 6. The rest of the tests marked gpu.
block gpu_tests "${gpu_pytest[@]}" -k "not ($update_tests)$no_triton" --junitxml="$WORK/gpu_tests.xml"

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
    --force --out "$WORK/g1_tracking_sac_gpu.json" --plot "$WORK/g1_tracking_sac_gpu.png" -- "${train_compile[@]}"
  block eval_tracking "$PY" -m unilab_gpu.cli.eval "$WORK/g1_tracking_sac_gpu_run" --device cuda --trials 1024 \
    --force --out "$WORK/g1_tracking_sac_gpu_eval.json"
  block curve_velocity "$PY" scripts/learning_curve.py --device cuda \
    --task g1_velocity --algo sac_velocity --num-envs 2048 --eval-envs 1024 --minutes 2 --log-every 50 \
    --force --out "$WORK/g1_velocity_sac_gpu.json" --plot "$WORK/g1_velocity_sac_gpu.png" -- "${train_compile[@]}"
fi

# 9. Only with ROUGH=1 (a call of its own with SKIP_CHECKS=1): generated terrain inside the
#    captured step at 4096 envs. The doctor's physics, capture, replay == eager (with resets, so
#    the curriculum and the spawn on origins run in the graph), no-sync and solver A/B checks on
#    go2_velocity_rough, both rough tasks' step audits on CUDA, and unilab-bench's captured rough
#    step against physics alone on the same terrain and on flat ground at 1024 / 4096 envs; then
#    the compiled step == the eager one on CUDA, g1_tracking and go2_velocity_rough at 1024 envs
#    (skipped without Triton).
if [ "${ROUGH:-0}" = 1 ]; then
  block warm_rough "$PY" -m unilab_gpu.doctor.warm --device cuda --task go2_velocity_rough --num-envs 4096 \
    --workers "$workers" --out "$WORK/warm_rough.json"
  block doctor_rough "$PY" -m unilab_gpu.cli.doctor --device cuda --capture-task go2_velocity_rough \
    --tasks go2_velocity_rough g1_velocity_rough --num-envs 4096 --no-compile --out "$WORK/doctor_rough.json"
  block bench_rough "$PY" -m unilab_gpu.cli.bench --task go2_velocity_rough --device cuda \
    --num-envs 1024 4096 --steps 50 --warmup 5 --no-compile --force --out "$WORK/bench_gpu_rough.json"
  if [ "$triton" = True ]; then
    block compiled_eager "$PY" -m unilab_gpu.doctor.compiled_eager --device cuda \
      --tasks g1_tracking go2_velocity_rough --num-envs 1024 --steps 30 --out "$WORK/compiled_eager.json"
  else  # the environment line said why; not a failure of this check
    skip compiled_eager no_triton
  fi
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
    --force --out "$WORK/go2_velocity_rough_sac_gpu.json" --plot "$WORK/go2_velocity_rough_sac_gpu.png" \
    -- "${train_compile[@]}"
  block eval_rough "$PY" -m unilab_gpu.cli.eval "$WORK/go2_rough_gpu_run" --device cuda \
    --terrain slopes_stairs_eval --rows-per-column 256 --force --out "$WORK/go2_velocity_rough_gpu_terrain_eval.json"
  block eval_rough_heights "$PY" -m unilab_gpu.cli.eval "$WORK/go2_rough_gpu_run" --device cuda \
    --terrain stairs_heights_eval --rows-per-column 128 --force --out "$WORK/go2_velocity_rough_gpu_stairs_heights_eval.json"
fi

# 11. Only with UPDATE=1 (a call of its own with SKIP_CHECKS=1 and GPU_CHECK_SECONDS=240): issue
#     49's update beside the captured step, FlashSAC at 4096 envs: update ms and training
#     env-steps/s, eager against compiled and captured (algo.capture_update); without Triton (block
#     0's proof) eager against captured-uncompiled. Its warm step: the env's Warp modules.
if [ "${UPDATE:-0}" = 1 ]; then
  update_modes=(eager compiled captured)
  [ "$triton" = True ] || update_modes=(eager captured_eager)
  block warm_update "$PY" -m unilab_gpu.doctor.warm --device cuda --task g1_tracking --num-envs 4096 \
    --workers "$workers" --out "$WORK/warm_update.json"
  block train_update "$PY" scripts/bench_update.py --device cuda --presets gpu --modes "${update_modes[@]}" \
    --warm-updates 4 --updates 20 --blocks 3 --iterations 5 --force --out "$WORK/bench_gpu_update.json"
fi

# 12. Only with DANCE_LEARNING=1 (a call of its own with SKIP_CHECKS=1): the dance clip that
#     holosoma's PPO G1 dancing policy embeds (in GPU_CHECK_PEERS, default ../shared/peers,
#     which the device machine gets with the working tree; facts only: unilab-motion from-onnx
#     extracts the clip into the working folder), learned by G1 tracking at GPU size (SAC, 4096
#     envs, 2.5 minutes, the clip as commands.motion.params.motion_files), then the trained
#     policy's full-clip evaluation (unilab-eval, 1024 trials from frame 0 and 1024 from spread
#     starts). Skipped, with the reason, where that file is not on this machine.
# The PPO file's dance: the FastSAC file embeds the same dance with 2 s blends to and from standing.
DANCE_ONNX="${GPU_CHECK_PEERS:-../shared/peers}/holosoma/ppo_g1_29dof_dancing.onnx"
if [ "${DANCE_LEARNING:-0}" = 1 ]; then
  if [ $PLAN = 1 ] || [ -f "$DANCE_ONNX" ]; then
    [ $PLAN = 1 ] || rm -rf "$WORK/g1_dance_gpu_run" "$WORK/g1_dance_clip.npz"  # the check's own, made anew
    block dance_clip "$PY" -m unilab_gpu.cli.motion from-onnx "$DANCE_ONNX" "$WORK/g1_dance_clip.npz"
    block warm_dance "$PY" -m unilab_gpu.doctor.warm --device cuda --task g1_tracking --num-envs 4096 \
      --workers "$workers" --out "$WORK/warm_dance.json"
    block curve_dance "$PY" scripts/learning_curve.py --device cuda --algo sac --num-envs 4096 \
      --motion "$WORK/g1_dance_clip.npz" --eval-envs 1024 --clean-eval-envs 1024 --minutes 2.5 --log-every 50 \
      --keep-run "$WORK/g1_dance_gpu_run" --force --out "$WORK/g1_dance_sac_gpu.json" \
      --plot "$WORK/g1_dance_sac_gpu.png" -- "${train_compile[@]}"
    block eval_dance "$PY" -m unilab_gpu.cli.eval "$WORK/g1_dance_gpu_run" --device cuda --trials 1024 \
      --force --out "$WORK/g1_dance_sac_gpu_eval.json"
  else
    [ $PLAN = 1 ] || echo "gpu_check: DANCE_LEARNING: $DANCE_ONNX is not on this machine (../shared/peers travels with the working tree); its blocks are skipped"
    for name in dance_clip warm_dance curve_dance eval_dance; do skip "$name" no_shared_peers; done
  fi
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
