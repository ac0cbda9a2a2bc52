"""RL agent configurations of the push-cube task."""
