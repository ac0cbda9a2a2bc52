"""RL agent configurations of the Cartpole task: Isaac Lab's rsl_rl cfg, and skrl's in skrl 2's field names."""
