"""MJWarp worlds as torch tensors: the simulator, devices and streams, CUDA-graph capture."""
