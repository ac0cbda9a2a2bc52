"""Brute-force references of the chunk aggregators: the action of one step from every prediction made for it,
oldest first, computed from the definitions instead of online."""

import math


def act_temporal_ensemble(predictions: list[float], coeff: float = 0.01) -> float:
    """ACT's temporal ensemble: sum_i w_i a_i / sum_i w_i with w_i = exp(-coeff i), i = 0 the oldest."""
    weights = [math.exp(-coeff * i) for i in range(len(predictions))]
    return sum(w * p for w, p in zip(weights, predictions)) / sum(weights)


def blend_chain(predictions: list[float], old_weight: float = 0.3) -> float:
    """LeRobot's weighted average, applied once per new prediction: m = old_weight m + (1 - old_weight) p."""
    merged = predictions[0]
    for p in predictions[1:]:
        merged = old_weight * merged + (1.0 - old_weight) * p
    return merged


REFERENCES = {"temporal_ensemble": act_temporal_ensemble, "blend": blend_chain, "replace": lambda p: p[-1]}
"""Reference of each named aggregator."""
