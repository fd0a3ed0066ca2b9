"""G1 velocity tracking (walking): command with gait clock, terms, penalty curriculum."""
