"""RL agent configurations of the Cartpole task: Isaac Lab's hyperparameters, rsl_rl's with its observation groups
named, skrl's in skrl 2's field names (so that neither library warns about them)."""
