"""A lint over the hot-path modules for bugs that only a GPU shows: a tensor created without ``device=`` (on the CPU
beside the env's CUDA tensors: a device mismatch, or a copy every step) and host reads of device values
(``.item()``, ``.tolist()``, ``.nonzero()``, ``.cpu()``, ``.numpy()``, ``torch.equal``, ``int(t.sum())``,
``if t.any():``), each a host-device sync on CUDA. Every host read must be listed below with the reason it is not
per step (set-up, a tick, a host mirror's gate, a numpy array); an unlisted one fails, and so does a listed one
that is gone."""

import ast
import os

import pytest

PACKAGE = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "isaaclab_suspend")
HOT_PATH = (
    "envs/suspendable_env.py",
    "suspension/suspension_manager.py",
    "suspension/frozen_rows.py",
    "suspension/newton_state.py",
    "suspension/per_env_rng.py",
    "suspension/random_streams.py",
    "suspension/state_hash.py",
    "chunking/chunking_policy.py",
    "chunking/chunk_queues.py",
    "chunking/schedules.py",
    "chunking/aggregators.py",
    "chunking/provenance.py",
    "chunking/observation_history.py",
    "chunking/async_inference.py",
    "chunking/stats.py",
    "runs/episode_ledger.py",
    "recording/recorder_manager.py",
    "recording/episode_buffers.py",
    "recording/recorders.py",
    "tensor_tree.py",
)
"""Modules on the step, chunk and recording paths (docs/architecture.rst)."""
CONSTRUCTORS = {"zeros", "ones", "empty", "full", "arange", "tensor", "as_tensor", "rand", "randn", "randint",
                "randperm", "linspace", "eye"}
HOST_READS = {"item", "tolist", "nonzero", "cpu", "numpy"}
REDUCTIONS = {"any", "all", "sum", "max", "min", "amax", "amin", "count_nonzero"}

ALLOWED = {
    ("envs/suspendable_env.py", "SuspendableManagerBasedRLEnv._step_with_suspended", ".nonzero()"):
        "Isaac Lab's own reset query, mirrored line for line from the parent's step (the stock step makes it too)",
    ("suspension/suspension_manager.py", "SuspensionManager.num_suspended", "int(.sum())"):
        "only between a suspend/resume with device ids and the next step, which refreshes the host mirror",
    ("suspension/suspension_manager.py", "SuspensionManager.env_state", ".nonzero()"): "the audit's report",
    ("suspension/random_streams.py", "_Routed._call_per_env", ".tolist()"):
        "an event term drawing from Python's random, called per env id: it reads its env ids on the host itself",
    ("suspension/newton_state.py", "add_newton_state", ".numpy()"): "set-up: Newton's model layout, once",
    ("suspension/state_hash.py", "StateHash.add", "int(.max())"): "set-up: a tensor's rows per env, once",
    ("chunking/chunking_policy.py", "check_action_values", "if .all()"): "once per model call (per lerobot-eval"
                                                                          " step: host rows)",
    ("chunking/chunking_policy.py", "check_action_values", "bool(.all())"): "once per model call",
    ("chunking/chunking_policy.py", "check_action_values", ".nonzero()"): "error message only",
    ("chunking/chunking_policy.py", "check_action_values", ".tolist()"): "error message only",
    ("chunking/chunk_queues.py", "ChunkQueues.requests", "if .any()"):
        "only when the host mirror says a queue may run out (or after a reset)",
    ("chunking/chunk_queues.py", "ChunkQueues.requests", "bool(.any())"):
        "only when the host mirror says a queue may run out (or after a reset)",
    ("chunking/chunk_queues.py", "ChunkQueues._refresh_mirror", "int(.min())"): "the mirror's refresh: ticks, resets",
    ("chunking/schedules.py", "PartialBatchSchedule.plan", ".nonzero()"): "at a request only (a model call)",
    ("chunking/schedules.py", "AutoSchedule.plan", "int(.sum())"): "at a tick only",
    ("chunking/schedules.py", "AutoSchedule.plan", ".nonzero()"): "at a tick only",
    ("chunking/stats.py", "ChunkingStats.as_dict", "int(.sum())"): "figures on request (one sync)",
    ("chunking/stats.py", "ChunkingStats.as_dict", ".tolist()"): "figures on request (one sync)",
    ("runs/episode_ledger.py", "EpisodeLedger.finished", "bool(.all())"): "a numpy array (host)",
    ("runs/episode_ledger.py", "EpisodeLedger.update", ".cpu()"): "only in steps that reset an env",
    ("runs/episode_ledger.py", "EpisodeLedger.update", ".numpy()"): "only in steps that reset an env",
    ("runs/episode_ledger.py", "EpisodeLedger.update", ".tolist()"): "a numpy array (host)",
    ("runs/episode_ledger.py", "EpisodeLedger.records", ".cpu()"): "the episode log, at the end",
    ("runs/episode_ledger.py", "EpisodeLedger.records", ".tolist()"): "the episode log, at the end",
    ("runs/episode_ledger.py", "EpisodeLedger._allocate", "int(.sum())"): "a numpy array (host)",
    ("runs/episode_ledger.py", "EpisodeLedger._allocate", "if .any()"): "a numpy array (host)",
    ("runs/episode_ledger.py", "EpisodeLedger._discard_uncounted", ".tolist()"): "a numpy array",
    ("recording/recorder_manager.py", "SuspendableRecorderManager.__init__", ".numpy()"): "set-up, CPU only",
    ("recording/recorder_manager.py", "SuspendableRecorderManager.export_episodes", ".tolist()"):
        "an export (episode ends), not a step",
    ("recording/recorder_manager.py", "SuspendableRecorderManager.export_episodes", "if .any()"): "a numpy array",
    ("recording/recorder_manager.py", "SuspendableRecorderManager._ids_list", ".tolist()"): "an export or a reset",
    ("recording/episode_buffers.py", "_Stream.host", ".numpy()"): "a view of a CPU buffer (no copy)",
    ("recording/episode_buffers.py", "EpisodeBuffers.append", "int(.max())"):
        "only when the host bound reaches the capacity (a growth)",
    ("recording/episode_buffers.py", "EpisodeBuffers.append_rows", "int(.max())"): "at resets only (initial states)",
    ("recording/episode_buffers.py", "EpisodeBuffers.episode", ".tolist()"): "a copy on request",
    ("recording/episode_buffers.py", "EpisodeBuffers._gather", ".tolist()"): "the hand-over of ended episodes",
    ("recording/episode_buffers.py", "EpisodeBuffers._bounds", ".tolist()"): "a numpy array (host)",
    ("recording/episode_buffers.py", "EpisodeBuffers._host_rows", ".numpy()"): "CPU buffers only",
}
"""Host reads allowed in the hot path: (module, function, what) -> why it is not a per-step sync."""


def findings(source: str) -> list[tuple[str, str, int]]:
    """``(function qualname, what, line)`` of each tensor made without ``device=`` and each host read in ``source``."""
    out = []

    def visit(node: ast.AST, scope: list[str]) -> None:
        for child in ast.iter_child_nodes(node):
            inner = scope + [child.name] if isinstance(child, (ast.FunctionDef, ast.ClassDef)) else scope
            where = ".".join(inner)
            if isinstance(child, ast.Call):
                f = child.func
                attr = f.attr if isinstance(f, ast.Attribute) else None
                on_torch = isinstance(f, ast.Attribute) and isinstance(f.value, ast.Name) and f.value.id == "torch"
                if on_torch and attr in CONSTRUCTORS and not any(k.arg == "device" for k in child.keywords):
                    out.append((where, f"torch.{attr} without device=", child.lineno))
                elif on_torch and attr in ("equal", "allclose"):
                    out.append((where, f"torch.{attr}", child.lineno))
                elif attr in HOST_READS:
                    out.append((where, f".{attr}()", child.lineno))
                elif isinstance(f, ast.Name) and f.id in ("bool", "int", "float") and child.args:
                    arg = child.args[0]
                    reduced = isinstance(arg, ast.Call) and isinstance(arg.func, ast.Attribute)
                    if reduced and arg.func.attr in REDUCTIONS:
                        out.append((where, f"{f.id}(.{arg.func.attr}())", child.lineno))
            if isinstance(child, (ast.If, ast.While, ast.Assert, ast.IfExp)):
                for n in ast.walk(child.test):
                    if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) and n.func.attr in ("any", "all"):
                        out.append((where, f"if .{n.func.attr}()", n.lineno))
            visit(child, inner)

    visit(ast.parse(source), [])
    return out


def test_the_lint_sees_each_class_of_bug():
    source = (
        "class Term:\n"
        "    def step(self, mask):\n"
        "        buf = torch.zeros(4)\n"
        "        ok = torch.ones(4, device=mask.device)\n"
        "        if mask.any():\n"
        "            return int(mask.sum()), mask.nonzero(), mask.item(), mask.cpu(), torch.equal(buf, ok)\n"
    )
    whats = {what for where, what, _ in findings(source) if where == "Term.step"}
    assert whats == {"torch.zeros without device=", "if .any()", "int(.sum())", ".nonzero()", ".item()", ".cpu()",
                     "torch.equal"}


@pytest.mark.parametrize("module", HOT_PATH)
def test_hot_path_makes_tensors_on_the_device_and_reads_the_host_only_where_listed(module):
    with open(os.path.join(PACKAGE, module)) as f:
        found = findings(f.read())
    unlisted = [f"{module}:{line} {where}: {what}" for where, what, line in found
                if (module, where, what) not in ALLOWED]
    assert not unlisted, "not allowed in the hot path (or list it with its reason in ALLOWED):\n" + "\n".join(unlisted)
    stale = [key for key in ALLOWED if key[0] == module and (key[1], key[2]) not in {(w, x) for w, x, _ in found}]
    assert not stale, f"listed but gone (remove from ALLOWED): {stale}"
