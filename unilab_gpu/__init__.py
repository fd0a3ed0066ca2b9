"""unilab-gpu: GPU-resident, manager-based RL environments on MuJoCo Warp and PyTorch."""

__version__ = "0.1.0"
