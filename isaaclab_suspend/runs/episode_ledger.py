"""Fair episode accounting: which episodes of a run count (per-env quotas, a total), and one record per counted one."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

import numpy as np
import torch

if TYPE_CHECKING:
    from isaaclab.envs import ManagerBasedRLEnv


class EpisodeLedger:
    """Decides which episodes of a run count, retires the envs that must not start another, and records each
    counted episode (env, index within the env, success, length, suspended steps, model calls, demo name).

    Counting the first episodes to finish (GR00T's and IsaacLab-Arena's evaluations, a fixed step window)
    over-represents the short ones, often the successes. With ``per_env = K`` every env runs exactly K counted
    episodes from its first reset, then is retired (suspended and frozen, or holding under a schedule that does
    not suspend, its steps not counted) until every env has run its K; the run is then :attr:`finished`. With
    ``total = N`` (a recording of N demos) an episode counts only if it starts while fewer than N counted
    episodes are ended or open, in env order, and an env whose next episode would exceed N is retired: exactly N
    end. Without either, every episode that starts in the run counts (a fixed window). An env's first episode
    counts only if it started in the run (``count_first``): a desynchronised start cuts its time budget.

    Per step the device counters of the open episodes advance without a host read. On a step where the env
    reset some env (its host counter ``reset_count`` says so; the env's reset read the device already) the
    ledger reads ``dones`` and the ``success`` term once, records the counted episodes that ended, decides which
    of the new ones count and retires the envs past their quota.

    Args:
        env: The env; its ``success`` termination term is read when it has one.
        per_env: Counted episodes per env (None: no per-env quota).
        total: Counted episodes in all (None: no total).
        count_first: Count the episode each env is in when the run starts (False after a desynchronised start).
        only_successes: With ``total``: count N successes (a file of successes only); failures do not count.
        retire: Takes the envs to retire, a bool mask of shape (N,) (e.g. ``ActionChunkingPolicy.retire``).
        discard: Takes host env ids whose open episodes are not demos (the recorder's ``discard_open_episodes``).
        export: The recorder's export mode (``all``, ``succeeded``, ``separate``), to name each episode's demo
            as the writer does (None: not recording).
        seed: The run's seed, in each record.
    """

    def __init__(self, env: ManagerBasedRLEnv, per_env: int | None = None, total: int | None = None,
                 count_first: bool = True, only_successes: bool = False,
                 retire: Callable[[torch.Tensor], None] | None = None,
                 discard: Callable[[list[int]], None] | None = None, export: str | None = None,
                 seed: int | None = None):
        if per_env is not None and total is not None:
            raise ValueError("EpisodeLedger takes a per-env quota or a total, not both.")
        self.env = env
        self.per_env, self.total, self.only_successes = per_env, total, only_successes
        self.export, self.seed = export, seed
        self._retire, self._discard = retire, discard
        self.has_success = "success" in env.termination_manager.active_terms
        """Whether the task has a ``success`` termination term (success rate is NaN otherwise)."""
        n, device = env.num_envs, env.device
        self.length = torch.zeros(n, dtype=torch.long, device=device)
        """Steps each env was simulated in its open episode. Shape: (N,)."""
        self.suspended_steps = torch.zeros(n, dtype=torch.long, device=device)
        """Steps each env waited suspended in its open episode. Shape: (N,)."""
        self.calls = torch.zeros(n, dtype=torch.long, device=device)
        """Model calls that served each env's open episode. Shape: (N,)."""
        self.returns = torch.zeros(n, dtype=torch.float32, device=device)
        """Sum of the rewards of each env's open episode (its suspended steps add nothing). Shape: (N,)."""
        self.counted = np.zeros(n, dtype=bool)
        """Host: whether each env's open episode counts."""
        self.ended = np.zeros(n, dtype=np.int64)
        """Host: counted episodes each env ended."""
        self.retired = np.zeros(n, dtype=bool)
        """Host: envs retired (they start no counted episode any more)."""
        self._ended_total = 0  # counted episodes ended (successes only with only_successes)
        self._demos = [0, 0]  # demos written to the dataset file and to the failed-episode file
        self._host: list[dict] = []
        self._rows: list[torch.Tensor] = []  # device (3, B) per reset step: length, suspended steps, calls
        self._returns: list[torch.Tensor] = []  # device (B,) per reset step
        self._resets_seen = env.reset_count
        self._steps = 0  # steps accounted (host)
        if count_first:
            self._allocate(np.ones(n, dtype=bool))
        self._discard_uncounted(np.ones(n, dtype=bool))

    @property
    def ended_count(self) -> int:
        """Counted episodes ended so far (successes only with ``only_successes``)."""
        return self._ended_total

    @property
    def finished(self) -> bool:
        """Whether every counted episode of a quota or total has ended (always False without one)."""
        if self.per_env is not None:
            return bool((self.ended >= self.per_env).all())
        return self.total is not None and self._ended_total >= self.total

    def update(self, dones: torch.Tensor, suspended: torch.Tensor, served: torch.Tensor | None = None) -> None:
        """Account one env step: ``dones`` (terminated | truncated), ``suspended`` and ``served`` (envs a model
        call served a chunk this step; None: none) are bool tensors of shape (N,)."""
        self._steps += 1
        self.length += ~suspended
        self.suspended_steps += suspended
        if served is not None:
            self.calls += served
        self.returns += self.env.reward_buf.masked_fill(suspended, 0.0)
        if self.env.reset_count == self._resets_seen:
            return
        self._resets_seen = self.env.reset_count
        done = dones.cpu().numpy()
        success = self.env.termination_manager.get_term("success").cpu().numpy() if self.has_success else None
        ended = np.flatnonzero(done & self.counted)
        if ended.size:
            self._rows.append(torch.stack((self.length, self.suspended_steps, self.calls))[
                :, torch.as_tensor(ended, device=self.length.device)])
            self._returns.append(self.returns[torch.as_tensor(ended, device=self.length.device)])
            for env_id in ended.tolist():
                succeeded = bool(success[env_id]) if success is not None else False
                self._host.append({"env_id": env_id, "episode": int(self.ended[env_id]), "seed": self.seed,
                                   "success": succeeded, "end_step": self._steps - 1, **self._demo(succeeded)})
                self._ended_total += succeeded or not self.only_successes
            self.ended[ended] += 1
        for counter in (self.length, self.suspended_steps, self.calls, self.returns):
            counter.masked_fill_(dones, 0)
        self.counted &= ~done
        if not self.finished:
            self._allocate(done & ~self.retired)
        self._discard_uncounted(done)

    def records(self) -> list[dict]:
        """One dict per counted episode that ended, in the order they ended (one device read): ``env_id``,
        ``episode`` (its index within the env), ``seed``, ``success``, ``end_step`` (the run's step it ended in,
        from 0), ``length`` (env steps simulated), ``suspended_steps``, ``calls`` (model calls that served it),
        ``return`` (the sum of its rewards) and, when recording, ``demo``."""
        if not self._rows:
            return []
        rows = torch.cat(self._rows, dim=1).cpu().tolist()
        returns = torch.cat(self._returns).cpu().tolist()
        return [{**record, "length": length, "suspended_steps": suspended, "calls": calls, "return": round(ret, 6)}
                for record, length, suspended, calls, ret in zip(self._host, *rows, returns)]

    def as_dict(self, records: list[dict] | None = None) -> dict[str, float | int]:
        """``episodes_scored``, ``mean_episode_length`` and ``success_rate`` (NaN without episodes or without a
        success term) of :meth:`records` (or of ``records``)."""
        records = self.records() if records is None else records
        count = len(records)
        return {
            "episodes_scored": count,
            "mean_episode_length": sum(r["length"] for r in records) / count if count else float("nan"),
            "success_rate": (sum(r["success"] for r in records) / count if count and self.has_success
                             else float("nan")),
        }

    def _allocate(self, starting: np.ndarray) -> None:
        """Decide which of the episodes the envs in ``starting`` (host bool mask) begin count; retire the others."""
        allowed = starting.copy()
        if self.per_env is not None:
            allowed &= self.ended < self.per_env
        if self.total is not None:
            room = max(self.total - self._ended_total - int(self.counted.sum()), 0)
            allowed[np.flatnonzero(allowed)[room:]] = False
        self.counted |= allowed
        retire = starting & ~allowed
        if retire.any():
            self.retired |= retire
            if self._retire is not None:
                self._retire(torch.as_tensor(retire, device=self.length.device))

    def _discard_uncounted(self, starting: np.ndarray) -> None:
        """The episodes the envs in ``starting`` (host bool mask) begin and that do not count are not demos."""
        uncounted = np.flatnonzero(starting & ~self.counted)
        if uncounted.size and self._discard is not None:
            self._discard(uncounted.tolist())

    def _demo(self, success: bool) -> dict:
        """``{"demo": name}`` of an episode the writer names next (its file's next number; None when the export
        mode drops it), in the order the recorder exports (step by step, env ids ascending); ``{}`` if not
        recording."""
        if self.export is None:
            return {}
        if self.export == "succeeded" and not success:
            return {"demo": None}
        file = int(self.export == "separate" and not success)
        self._demos[file] += 1
        return {"demo": f"demo_{self._demos[file] - 1}"}
