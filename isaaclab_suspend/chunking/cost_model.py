"""An online model of what inference and simulation cost, for the ``auto`` schedule's decisions."""

from __future__ import annotations


class InferenceCostModel:
    """Inference latency as a function of batch size, ``L(b) = a + c * b``, and the env step time, fitted online.

    The latency line is a least-squares fit through the running mean latency of each batch size seen (each
    size weighs the same, so the many full-batch calls of a clock schedule do not drown the few partial ones).
    With one batch size seen so far, the fit is proportional (``a = 0``): it assumes small batches are cheap,
    which makes the ``auto`` schedule try a partial batch when that would pay, measure it, and correct itself.
    The step time is an exponential moving average of the measured simulation time per env step.

    Args:
        smoothing: Weight of a new measurement in the moving averages, in (0, 1].
    """

    def __init__(self, smoothing: float = 0.2):
        if not 0.0 < smoothing <= 1.0:
            raise ValueError(f"smoothing must lie in (0, 1], got {smoothing}.")
        self._smoothing = smoothing
        self._latency_by_batch: dict[int, float] = {}
        """Running mean latency [s] per batch size."""
        self.step_time: float | None = None
        """Moving average of the simulation time of one env step [s]; None before the first step."""

    @property
    def ready(self) -> bool:
        """Whether the model has seen at least one inference and one step."""
        return bool(self._latency_by_batch) and self.step_time is not None

    def record_inference(self, batch_size: int, seconds: float) -> None:
        """Add a measured inference call on ``batch_size`` rows lasting ``seconds``."""
        previous = self._latency_by_batch.get(batch_size)
        self._latency_by_batch[batch_size] = seconds if previous is None else self._average(previous, seconds)

    def record_step(self, seconds: float) -> None:
        """Add the measured simulation time of one env step."""
        self.step_time = seconds if self.step_time is None else self._average(self.step_time, seconds)

    def latency_line(self) -> tuple[float, float]:
        """The fitted ``(a, c)`` of ``L(b) = a + c * b``, both >= 0.

        Raises:
            RuntimeError: Before any inference was recorded.
        """
        if not self._latency_by_batch:
            raise RuntimeError("No inference recorded yet: the latency line is unknown.")
        sizes = list(self._latency_by_batch)
        times = list(self._latency_by_batch.values())
        mean_b = sum(sizes) / len(sizes)
        mean_t = sum(times) / len(times)
        var_b = sum((b - mean_b) ** 2 for b in sizes)
        if var_b == 0.0:
            return 0.0, mean_t / mean_b
        slope = sum((b - mean_b) * (t - mean_t) for b, t in zip(sizes, times)) / var_b
        if slope < 0.0:  # larger batches measured faster: noise, treat the latency as fixed
            return mean_t, 0.0
        intercept = mean_t - slope * mean_b
        if intercept < 0.0:  # refit through the origin
            return 0.0, sum(b * t for b, t in zip(sizes, times)) / sum(b * b for b in sizes)
        return intercept, slope

    def latency(self, batch_size: int) -> float:
        """Predicted latency of a call on ``batch_size`` rows [s]."""
        a, c = self.latency_line()
        return a + c * batch_size

    def clock_rate(self, num_envs: int, chunk_length: int) -> float:
        """Useful env-steps per second of a global clock with no env waiting: ``N H / (H t_step + L(N))``."""
        return num_envs * chunk_length / (chunk_length * self.step_time + self.latency(num_envs))

    def _average(self, mean: float, value: float) -> float:
        return (1.0 - self._smoothing) * mean + self._smoothing * value
