"""What the benchmarks of ``scripts/benchmarks/`` and the tests of the hot path share, one concept a module: step
timing (``step_timing``), the observation demand's timing (``demand_timing``), two builds of one env timed in turn
(``paired_workers``), recording timing (``recording_timing``), host-sync counts and the check that quiet
steps make none (``host_syncs``), the GPU suite's parts (``gpu_suite``) and its kernel cache archives
(``kernel_cache``), env processes run against one policy server (``server_clients``), hostile peers' attacks on
the servers (``hostile_peers``) and the junk experiment's steps (``junk_experiment``).

No other package imports it: it sits above :mod:`isaaclab_suspend.cli` (docs/architecture.rst), whose rollout
loop it runs. Its modules are imported by name; the package itself imports nothing.
"""
