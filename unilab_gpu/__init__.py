"""unilab-gpu: GPU-resident, manager-based RL environments on MuJoCo Warp, with SAC/FlashSAC trainers."""
