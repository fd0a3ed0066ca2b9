"""Term configs and the managers that turn them into one compiled function per step phase."""
