#!/usr/bin/env bash
# Reproduces this folder and docs/benchmarks/learning/quad_menagerie_style_sac.{json,png} (issue 47's
# done-criterion): the Menagerie-style quadruped of tests/test_robot_recipe.py, written by the recipe
# of docs/robots.md into a UNILAB_PATH folder, trained 15 CPU minutes with SAC, exported, and run in
# plain MuJoCo for 20 s per command. Run from the repository root; about 20 minutes on one core.
set -euo pipefail
export UNILAB_PATH=${UNILAB_PATH:-$PWD/runs/quad_robots} OMP_NUM_THREADS=1 CUDA_VISIBLE_DEVICES=""
out=runs/quad_menagerie_style
rm -rf "$UNILAB_PATH" "$out"; mkdir -p "$UNILAB_PATH" "$out"
write_robot='
import sys; from pathlib import Path; from robot_models import menagerie_style_go2; from test_robot_recipe import recipe
root = Path(sys.argv[1]); key = Path(sys.argv[2]).read_text() if len(sys.argv) > 2 else None
if key is None:
    for path, text in recipe()[0].items():
        (root / path).parent.mkdir(parents=True, exist_ok=True); (root / path).write_text(text)
robot = root / "assets/robots/quad"; robot.mkdir(parents=True, exist_ok=True)
for name, text in menagerie_style_go2(key or "").items(): (robot / name).write_text(text)'
PYTHONPATH=$PWD:$PWD/tests python -c "$write_robot" "$UNILAB_PATH"
python scripts/stand_keyframe.py quad --pose '.*_hip_joint=0' '.*_thigh_joint=0.9' '.*_calf_joint=-1.8' > "$out/key.xml"
PYTHONPATH=$PWD:$PWD/tests python -c "$write_robot" "$UNILAB_PATH" "$out/key.xml"
python scripts/learning_curve.py --task quad_velocity --algo sac_velocity --minutes 15 \
  --seed 0 --num-envs 16 --eval-envs 16 --log-every 100 --keep-run "$out/run" \
  --out "$out/quad_sac.json" --plot "$out/quad_sac.png" \
  -- algo.batch_size=256 algo.updates_per_step=2 algo.buffer_capacity_per_env=8192 \
  "algo.actor_hidden_dims=[256,128]" "algo.critic_hidden_dims=[256,128]"
unilab-export "$out/run" --out "$out/quad.onnx"
for command in 0.5,0,0 -0.3,0,0 0,0.3,0 0,0,0.6; do
  unilab-sim2sim "$out/quad.onnx" --command "$command" --seconds 20 --out "$out/sim2sim_$command.json"
done
