"""Manager-based RL environments and the static-shape buffers their step is built from."""
