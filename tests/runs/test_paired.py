"""The paired verdict (``runs/paired.py``): McNemar's and Fisher's exact p against SciPy's, Newcombe's intervals'
properties, when two arms count as paired, and the sentence's numbers. Pure logic: small records, no env."""

import math

import pytest
from scipy import stats

from isaaclab_suspend.runs import paired


def _records(successes: list[bool], hashes: list[str] | None = None, lengths: list[int] | None = None,
             returns: list[float] | None = None) -> list[dict]:
    records = []
    for i, success in enumerate(successes):
        record = {"env_id": i % 4, "episode": i // 4, "success": success, "length": (lengths or [10] * 99)[i]}
        if hashes is not None:
            record["start_hash"] = hashes[i]
        if returns is not None:
            record["return"] = returns[i]
        records.append(record)
    return records


@pytest.mark.parametrize("better, worse", [(11, 2), (0, 0), (3, 3), (0, 7), (20, 1)])
def test_mcnemar_exact_is_the_two_sided_binomial_test_of_the_discordant_pairs(better, worse):
    expected = 1.0 if better + worse == 0 else stats.binomtest(better, better + worse, 0.5).pvalue
    assert paired.mcnemar_exact(better, worse) == pytest.approx(expected, rel=1e-9)


@pytest.mark.parametrize("table", [(8, 10, 1, 6), (5, 5, 5, 5), (0, 4, 4, 4), (12, 12, 3, 12), (1, 10, 11, 14)])
def test_fisher_exact_is_scipys(table):
    wins_a, n_a, wins_b, n_b = table
    expected = stats.fisher_exact([[wins_a, n_a - wins_a], [wins_b, n_b - wins_b]]).pvalue
    assert paired.fisher_exact(wins_a, n_a, wins_b, n_b) == pytest.approx(expected, rel=1e-9)


@pytest.mark.parametrize("table", [(40, 11, 2, 11), (0, 0, 0, 16), (16, 0, 0, 0), (3, 9, 0, 0), (5, 2, 7, 1)])
def test_paired_interval_holds_the_difference_and_flips_with_the_arms(table):
    both, only_b, only_a, neither = table
    d, low, high = paired.paired_difference_ci(both, only_b, only_a, neither)
    assert -1 <= low <= d <= high <= 1 and d == pytest.approx((only_b - only_a) / sum(table))
    d2, low2, high2 = paired.paired_difference_ci(both, only_a, only_b, neither)
    assert (d2, low2, high2) == pytest.approx((-d, -high, -low))
    if only_b + only_a == 0:  # no discordant pair: no evidence of a difference, but the interval still has width
        assert low < 0 < high


def test_paired_arms_with_equal_start_hashes_get_mcnemar_and_paired_differences():
    hashes = [f"{i:04x}" for i in range(16)]
    a = _records([i < 8 for i in range(16)], hashes, lengths=[20] * 16, returns=[1.0] * 16)
    b = _records([i < 14 for i in range(16)], hashes, lengths=[15] * 16, returns=[1.5] * 16)
    v = paired.compare(a, b, "A", "B", {"inference_calls": 100, "active_env_steps_per_s": 50.0},
                       {"inference_calls": 25, "active_env_steps_per_s": 100.0})
    assert v["paired"] and v["test"] == "McNemar exact" and (v["better"], v["worse"]) == (6, 0)
    assert v["p"] == pytest.approx(2 / 2**6) and v["calls_ratio"] == 0.25 and v["env_steps_per_s_ratio"] == 2.0
    assert v["length_difference"] == (-5.0, -5.0, -5.0) and v["return_difference"] == (0.5, 0.5, 0.5)
    low, high = v["ci"]
    assert v["sentence"].startswith(
        "B against A (paired: the same starts): B succeeds in 14 of 16 paired episodes, A in 8; B better in 6,"
        f" worse in 0; McNemar exact p = 0.031; difference +37.5 points [95 % CI {100 * low:+.1f}, {100 * high:+.1f}]")
    assert "model calls x0.25" in v["sentence"] and "return +0.50" in v["sentence"]


@pytest.mark.parametrize("change, reason", [
    (lambda b: [r.pop("start_hash") for r in b], "carry no start hash"),
    (lambda b: b[3].update(start_hash="ffff"), "1 of 8 episode starts differ"),
    (lambda b: b.pop(), "different (env, episode) sets")])
def test_arms_whose_starts_are_not_shown_equal_are_unpaired_with_fisher(change, reason):
    hashes = [f"{i:04x}" for i in range(8)]
    a, b = _records([True] * 4 + [False] * 4, hashes), _records([True] * 7 + [False], hashes)
    change(b)
    v = paired.compare(a, b)
    assert not v["paired"] and reason in v["unpaired_reason"] and v["test"] == "Fisher exact"
    assert v["p"] == pytest.approx(stats.fisher_exact(
        [[4, 4], [v["wins_b"], len(b) - v["wins_b"]]]).pvalue)
    assert v["sentence"].startswith(f"B against A, unpaired ({v['unpaired_reason']}): B succeeds in")
    assert "Fisher exact p" in v["sentence"] and "McNemar" not in v["sentence"]


def test_an_arm_without_a_finished_episode_gets_no_verdict():
    v = paired.compare(_records([True, False], ["a", "b"]), [])
    assert v["sentence"] == "B against A: no finished episode in B, so no verdict."
    assert math.isnan(v["difference"])


def test_compare_all_compares_every_later_arm_with_every_earlier_one():
    arms = {name: (_records([True] * 4, list("abcd")), {}) for name in ("A", "B", "C")}
    assert [(v["a"], v["b"]) for v in paired.compare_all(arms)] == [("A", "B"), ("A", "C"), ("B", "C")]


def test_compare_all_with_factors_compares_runs_that_differ_in_one_factor():
    arms = {f"{p}_{s}": (_records([True] * 4, list("abcd")), {}) for p in "AB" for s in ("any", "hold")}
    factors = {name: tuple(name.split("_")) for name in arms}
    assert [(v["a"], v["b"]) for v in paired.compare_all(arms, factors=factors)] == [
        ("A_any", "A_hold"), ("A_any", "B_any"), ("A_hold", "B_hold"), ("B_any", "B_hold")]


def test_run_verdicts_count_every_shard_and_pair_each_episode_within_its_shard():
    """Two shards of one run score the same (env, episode) keys from other starts (seeds apart). Shard 0: both arms
    succeed everywhere; shard 1: neither does. Paired within each shard, no pair is discordant; paired across
    shards (one env index taken for one env), B's successes of shard 0 would meet A's failures of shard 1."""
    shards = []
    for shard, success in enumerate((True, False)):
        hashes = [f"{shard}{i:03x}" for i in range(8)]
        shards.append({arm: {"episodes": _records([success] * 8, hashes), "policy": policy, "chunk_schedule": "any"}
                       for arm, policy in (("A", "planner"), ("B", "planner x0.6"))})
    [v] = paired.run_verdicts(shards, {"A": {"success_rate": 0.5}, "B": {"success_rate": 0.5}})
    assert v["paired"] and (v["episodes"], v["wins_a"], v["wins_b"], v["better"], v["worse"]) == (16, 8, 8, 0, 0)
    assert "B succeeds in 8 of 16 paired episodes, A in 8; B better in 0, worse in 0" in v["sentence"], v["sentence"]
    records = paired.shard_records([shards[0]["A"]["episodes"], shards[1]["A"]["episodes"]])
    assert len({paired.pair_key(r) for r in records}) == 16 and {r["shard"] for r in records} == {0, 1}
    # an episode of another shard is not a pair: shard 1's episodes left out of B's arm, the arms differ
    one_sided = paired.compare(records, paired.shard_records([shards[0]["B"]["episodes"]]))
    assert not one_sided["paired"] and "different (env, episode) sets" in one_sided["unpaired_reason"]


def test_run_verdicts_of_one_shard_are_compare_all_of_its_runs():
    hashes = [f"{i:04x}" for i in range(8)]
    runs = {"A": {"episodes": _records([True] * 6 + [False] * 2, hashes), "policy": "p", "chunk_schedule": "any"},
            "B": {"episodes": _records([True] * 2 + [False] * 6, hashes), "policy": "q", "chunk_schedule": "any"}}
    figures = {"A": {"success_rate": 0.75, "inference_calls": 10}, "B": {"success_rate": 0.25, "inference_calls": 20}}
    [v] = paired.run_verdicts([runs], figures)
    alone = paired.compare(runs["A"]["episodes"], runs["B"]["episodes"], "A", "B", figures["A"], figures["B"])
    assert v["sentence"] == alone["sentence"] and (v["better"], v["worse"], v["p"]) == (0, 4, alone["p"])
    nan = {"success_rate": math.nan}
    assert paired.has_success([nan, figures["A"]]) and not paired.has_success([nan, {}])
    assert "succeeds" not in paired.run_verdicts([runs], {"A": nan, "B": nan})[0]["sentence"]
