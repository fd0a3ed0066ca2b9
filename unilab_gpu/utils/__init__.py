"""Framework-wide helpers that depend on neither the simulator nor the env (e.g. the host-sync audit)."""
