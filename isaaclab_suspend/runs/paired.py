"""Is B better than A? The verdict on two arms of an evaluation (two policies, or two schedules) scored on the same
(env, episode) grid, from their episode records alone.

Two arms are *paired* when they scored the same (env, episode) keys and every one of them started from the same
initial state (equal ``start_hash`` in both records). Then each episode of B is compared with the same episode of
A: success with McNemar's exact test (a binomial test on the discordant pairs) and Newcombe's interval for a
difference of paired proportions, return and length as paired differences. Otherwise the arms are *unpaired* (the
sentence says so and why): success with Fisher's exact test and Newcombe's hybrid score interval for independent
proportions, return and length as differences of means. Model calls and useful env-steps/s are compared as ratios
of the arms' figures (calls are counts, exact; env-steps/s is a timing of one run, noisy).

An evaluation split into shards (``eval.py --shard``, torchrun's ranks) is judged over the episodes of all of them
(:func:`run_verdicts`), each paired within its own shard (:func:`pair_key`): the same env index in two shards is
two envs, seeded apart.

Pure Python (``math`` only): the printed output and the report call the same functions on the same records.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence

Z95 = 1.96
"""The standard normal quantile of a two-sided 95 % interval."""


def wilson(successes: int, count: int, z: float = Z95) -> tuple[float, float]:
    """The Wilson score interval of ``successes`` in ``count`` trials; ``(nan, nan)`` without trials."""
    if count == 0:
        return math.nan, math.nan
    p = successes / count
    centre = (p + z * z / (2 * count)) / (1 + z * z / count)
    half = z * math.sqrt(p * (1 - p) / count + z * z / (4 * count * count)) / (1 + z * z / count)
    return max(centre - half, 0.0), min(centre + half, 1.0)


def mcnemar_exact(better: int, worse: int) -> float:
    """Two-sided exact McNemar p: the binomial(better + worse, 1/2) probability of a split at least as uneven."""
    n = better + worse
    if n == 0:
        return 1.0
    tail = sum(math.comb(n, i) for i in range(min(better, worse) + 1)) / 2**n
    return min(1.0, 2 * tail)


def fisher_exact(wins_a: int, n_a: int, wins_b: int, n_b: int) -> float:
    """Two-sided Fisher exact p of a 2 x 2 table (successes and failures of two independent arms): the
    probability, under equal rates and the table's margins, of a table no more likely than the one seen."""
    wins, total = wins_a + wins_b, n_a + n_b
    if total == 0:
        return 1.0

    def prob(k: int) -> float:
        return math.comb(n_a, k) * math.comb(n_b, wins - k) / math.comb(total, wins)

    seen = prob(wins_a)
    ks = range(max(0, wins - n_b), min(wins, n_a) + 1)
    return min(1.0, sum(p for p in map(prob, ks) if p <= seen * (1 + 1e-7)))


def paired_difference_ci(both: int, only_b: int, only_a: int, neither: int, z: float = Z95
                         ) -> tuple[float, float, float]:
    """Success of B minus success of A over paired episodes, with Newcombe's (1998, method 10) interval from the
    Wilson intervals of the two rates and their correlation: ``(difference, low, high)``."""
    n = both + only_b + only_a + neither
    if n == 0:
        return math.nan, math.nan, math.nan
    p_b, p_a = (both + only_b) / n, (both + only_a) / n
    (l_b, u_b), (l_a, u_a) = wilson(both + only_b, n, z), wilson(both + only_a, n, z)
    denominator = (both + only_b) * (only_a + neither) * (both + only_a) * (only_b + neither)
    phi = (both * neither - only_b * only_a) / math.sqrt(denominator) if denominator else 0.0
    low = math.sqrt(max((p_b - l_b) ** 2 - 2 * phi * (p_b - l_b) * (u_a - p_a) + (u_a - p_a) ** 2, 0.0))
    high = math.sqrt(max((u_b - p_b) ** 2 - 2 * phi * (u_b - p_b) * (p_a - l_a) + (p_a - l_a) ** 2, 0.0))
    d = p_b - p_a
    return d, max(d - low, -1.0), min(d + high, 1.0)


def unpaired_difference_ci(wins_a: int, n_a: int, wins_b: int, n_b: int, z: float = Z95
                           ) -> tuple[float, float, float]:
    """Success of B minus success of A of independent arms, with Newcombe's hybrid score interval (method 10):
    ``(difference, low, high)``."""
    if n_a == 0 or n_b == 0:
        return math.nan, math.nan, math.nan
    p_a, p_b = wins_a / n_a, wins_b / n_b
    (l_a, u_a), (l_b, u_b) = wilson(wins_a, n_a, z), wilson(wins_b, n_b, z)
    d = p_b - p_a
    return d, d - math.sqrt((p_b - l_b) ** 2 + (u_a - p_a) ** 2), d + math.sqrt((u_b - p_b) ** 2 + (p_a - l_a) ** 2)


def mean_ci(values: Sequence[float], z: float = Z95) -> tuple[float, float, float]:
    """The mean of ``values`` with a normal 95 % interval of it: ``(mean, low, high)`` (nan without values; the
    interval is the mean itself for one value)."""
    n = len(values)
    if n == 0:
        return math.nan, math.nan, math.nan
    mean = sum(values) / n
    if n == 1:
        return mean, mean, mean
    half = z * math.sqrt(sum((v - mean) ** 2 for v in values) / (n - 1) / n)
    return mean, mean - half, mean + half


def mean_difference_ci(a: Sequence[float], b: Sequence[float], z: float = Z95) -> tuple[float, float, float]:
    """Mean of ``b`` minus mean of ``a`` (independent samples) with a normal 95 % interval (Welch's standard
    error): ``(difference, low, high)``."""
    if not a or not b:
        return math.nan, math.nan, math.nan
    mean_a, mean_b = sum(a) / len(a), sum(b) / len(b)
    var = sum(((v - mean_a) ** 2 for v in a)) / max(len(a) - 1, 1) / len(a) + sum(
        ((v - mean_b) ** 2 for v in b)) / max(len(b) - 1, 1) / len(b)
    d, half = mean_b - mean_a, z * math.sqrt(var)
    return d, d - half, d + half


def pair_key(record: Mapping) -> tuple[int, int, int]:
    """The key an episode record is paired on: ``(shard, env_id, episode)``; a record without ``shard`` (an
    unsharded run's) is of shard 0. The shard keeps apart the episodes of one env index in two shards."""
    return record.get("shard", 0), record["env_id"], record["episode"]


def shard_records(shards: Sequence[Sequence[Mapping]]) -> list[dict]:
    """The episode records of one run's shards (``shards[i]``: shard i's) as one list, each tagged with its
    shard's index (``shard``, which :func:`pair_key` pairs on)."""
    return [{**record, "shard": index} for index, records in enumerate(shards) for record in records]


def pairing(a: Sequence[Mapping], b: Sequence[Mapping]) -> str | None:
    """None when ``a`` and ``b`` (episode records) are paired: the same (env, episode) keys (:func:`pair_key`),
    each with a ``start_hash`` equal in both; else why not, in a few words."""
    keys_a = {pair_key(r): r.get("start_hash") for r in a}
    keys_b = {pair_key(r): r.get("start_hash") for r in b}
    if not keys_a or not keys_b:
        return "no finished episode in one arm"
    if set(keys_a) != set(keys_b):
        return "the arms scored different (env, episode) sets; a per-env quota (episodes_per_env) pairs them"
    if any(h is None for h in (*keys_a.values(), *keys_b.values())):
        return "the episode records carry no start hash"
    differ = sum(keys_a[k] != keys_b[k] for k in keys_a)
    if differ:
        return f"{differ} of {len(keys_a)} episode starts differ"
    return None


def _ratio(a: Mapping, b: Mapping, key: str) -> float:
    """``b[key] / a[key]`` (nan when either is missing or ``a``'s is 0)."""
    x, y = a.get(key), b.get(key)
    if not isinstance(x, (int, float)) or not isinstance(y, (int, float)) or not x or math.isnan(x):
        return math.nan
    return y / x


def compare(a: Sequence[Mapping], b: Sequence[Mapping], name_a: str = "A", name_b: str = "B",
            figures_a: Mapping | None = None, figures_b: Mapping | None = None, has_success: bool = True) -> dict:
    """The verdict on arm ``name_b`` against arm ``name_a`` from their episode records (``env_id``, ``episode``,
    ``success``, ``length``, and ``return``, ``start_hash`` where present) and figures (``inference_calls``,
    ``active_env_steps_per_s``). Returns a dict of numbers and the one-sentence ``sentence``."""
    figures_a, figures_b = figures_a or {}, figures_b or {}
    why = pairing(a, b)
    verdict = {"a": name_a, "b": name_b, "paired": why is None, "unpaired_reason": why,
               "calls_ratio": _ratio(figures_a, figures_b, "inference_calls"),
               "env_steps_per_s_ratio": _ratio(figures_a, figures_b, "active_env_steps_per_s")}
    if why is None:
        by_key = {pair_key(r): r for r in a}
        pairs = [(by_key[pair_key(r)], r) for r in b]
        table = {"both": 0, "only_b": 0, "only_a": 0, "neither": 0}
        for ra, rb in pairs:
            sa, sb = bool(ra["success"]), bool(rb["success"])
            table["both" if sa and sb else "only_b" if sb else "only_a" if sa else "neither"] += 1
        diff, low, high = paired_difference_ci(**table)
        verdict |= {"episodes": len(pairs), "episodes_a": len(pairs), "episodes_b": len(pairs),
                    "wins_a": table["both"] + table["only_a"], "wins_b": table["both"] + table["only_b"],
                    "better": table["only_b"], "worse": table["only_a"], "test": "McNemar exact",
                    "p": mcnemar_exact(table["only_b"], table["only_a"]),
                    "difference": diff, "ci": [low, high],
                    "length_difference": mean_ci([rb["length"] - ra["length"] for ra, rb in pairs]),
                    "return_difference": (mean_ci([rb["return"] - ra["return"] for ra, rb in pairs])
                                          if all("return" in r for r in (*a, *b)) else None)}
    else:
        wins_a, wins_b = sum(bool(r["success"]) for r in a), sum(bool(r["success"]) for r in b)
        diff, low, high = unpaired_difference_ci(wins_a, len(a), wins_b, len(b))
        verdict |= {"episodes": None, "episodes_a": len(a), "episodes_b": len(b), "wins_a": wins_a, "wins_b": wins_b,
                    "better": None, "worse": None, "test": "Fisher exact",
                    "p": fisher_exact(wins_a, len(a), wins_b, len(b)), "difference": diff, "ci": [low, high],
                    "length_difference": mean_difference_ci([r["length"] for r in a], [r["length"] for r in b]),
                    "return_difference": (mean_difference_ci([r["return"] for r in a], [r["return"] for r in b])
                                          if all("return" in r for r in (*a, *b)) else None)}
    verdict["sentence"] = sentence(verdict, has_success)
    return verdict


def _p(p: float) -> str:
    """A p-value as text: two significant digits, ``< 0.001`` below."""
    return "< 0.001" if p < 0.001 else f"= {p:.2g}"


def _signed(value: float, digits: int = 1) -> str:
    return f"{value:+.{digits}f}"


def sentence(v: Mapping, has_success: bool = True) -> str:
    """The verdict ``v`` of :func:`compare` in one sentence (the same text the printed output and the page show)."""
    a, b = v["a"], v["b"]
    if not v["episodes_a"] or not v["episodes_b"]:
        return f"{b} against {a}: no finished episode in {a if not v['episodes_a'] else b}, so no verdict."
    if v["paired"]:
        head = f"{b} against {a} (paired: the same starts):"
    else:
        head = f"{b} against {a}, unpaired ({v['unpaired_reason']}):"
    parts = []
    if has_success:
        low, high = v["ci"]
        interval = f"[95 % CI {_signed(100 * low)}, {_signed(100 * high)}]"
        if v["paired"]:
            parts.append(f"{b} succeeds in {v['wins_b']} of {v['episodes']} paired episodes, {a} in {v['wins_a']};"
                         f" {b} better in {v['better']}, worse in {v['worse']}; McNemar exact p {_p(v['p'])};"
                         f" difference {_signed(100 * v['difference'])} points {interval}")
        else:
            parts.append(f"{b} succeeds in {v['wins_b']} of {v['episodes_b']} episodes, {a} in {v['wins_a']} of"
                         f" {v['episodes_a']}; Fisher exact p {_p(v['p'])}; difference"
                         f" {_signed(100 * v['difference'])} points {interval}")
    for key, what in (("return_difference", "return"), ("length_difference", "episode length")):
        if v.get(key) is not None:
            mean, low, high = v[key]
            parts.append(f"{what} {_signed(mean, 2)} [{_signed(low, 2)}, {_signed(high, 2)}]")
    if not math.isnan(v["calls_ratio"]):
        parts.append(f"model calls x{v['calls_ratio']:.2f}")
    if not math.isnan(v["env_steps_per_s_ratio"]):
        parts.append(f"useful env-steps/s x{v['env_steps_per_s_ratio']:.2f} (timing, one run)")
    return f"{head} {'; '.join(parts)}."


def compare_all(arms: Mapping[str, tuple[Sequence[Mapping], Mapping]], has_success: bool = True,
                factors: Mapping[str, tuple] | None = None) -> list[dict]:
    """:func:`compare` of every two of ``arms`` (name -> ``(episode records, figures)``), each later arm against
    each earlier one, in order. With ``factors`` (name -> e.g. ``(policy, schedule)``) only two arms that differ in
    at most one factor are compared: policies under the same schedule, schedules of the same policy."""
    names = list(arms)
    pairs = [(x, y) for i, x in enumerate(names) for y in names[i + 1:]]
    if factors:
        pairs = [(x, y) for x, y in pairs if sum(a != b for a, b in zip(factors[x], factors[y])) <= 1]
    return [compare(arms[x][0], arms[y][0], x, y, arms[x][1], arms[y][1], has_success) for x, y in pairs]


def has_success(figures: Iterable[Mapping]) -> bool:
    """Whether the task has a success term: a run's ``success_rate`` among ``figures`` is a number (NaN without
    one)."""
    rates = [f.get("success_rate") for f in figures]
    return any(isinstance(rate, (int, float)) and not math.isnan(rate) for rate in rates)


def run_verdicts(shards: Sequence[Mapping[str, Mapping]], figures: Mapping[str, Mapping],
                 success: bool | None = None) -> list[dict]:
    """:func:`compare_all` of an evaluation's runs, each a policy under a schedule, over the episodes of all its
    shards (one for an unsharded run), each paired within its shard (:func:`shard_records`). ``shards[i]`` holds
    shard i's runs by name as a run log's schedule records do (``episodes``, ``policy``, ``chunk_schedule``; other
    keys unread), ``figures`` each run's figures (merged over the shards); ``success`` None: :func:`has_success` of
    them. Only runs that differ in their policy or in their schedule, not both, are compared."""
    first = shards[0]
    arms = {name: (shard_records([shard[name]["episodes"] for shard in shards]), figures[name]) for name in first}
    factors = {name: (run.get("policy"), run.get("chunk_schedule")) for name, run in first.items()}
    return compare_all(arms, has_success(figures.values()) if success is None else success, factors)
