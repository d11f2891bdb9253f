"""Metrics on hand-computed cases."""

import numpy as np
import pytest

from autotune.costmodel.metrics import pairwise_accuracy, task_mean_top_k, top_k_interval, top_k_score


def test_top_k_hand_computed():
    # task 0: latencies 1, 2, 4 ; task 1: latencies 10, 20
    lat = np.array([1.0, 2.0, 4.0, 10.0, 20.0])
    groups = np.array([0, 0, 0, 1, 1])
    perfect = np.array([3.0, 2.0, 1.0, 5.0, 4.0])
    assert top_k_score(lat, perfect, groups, {0: 1, 1: 1}, 1) == pytest.approx(1.0)
    worst = -perfect
    # top-1 picks latency 4 (task 0) and 20 (task 1): (1 + 10) / (4 + 20)
    assert top_k_score(lat, worst, groups, {0: 1, 1: 1}, 1) == pytest.approx(11 / 24)
    # weights: task 0 appears 3 times -> (3*1 + 10) / (3*4 + 20)
    assert top_k_score(lat, worst, groups, {0: 3, 1: 1}, 1) == pytest.approx(13 / 32)
    # top-2 of worst ranking in task 0 = {4, 2} -> best 2; task 1 both -> 10
    assert top_k_score(lat, worst, groups, {0: 1, 1: 1}, 2) == pytest.approx(11 / 12)


def test_task_mean_top_k_hand_computed():
    # task 0: the top-scored program is 2x the best; task 1 (100x slower programs): the best is picked
    lat = np.array([1.0, 2.0, 3.0, 100.0, 300.0])
    score = np.array([0.1, 0.9, 0.5, 0.8, 0.2])
    groups = np.array([0, 0, 0, 1, 1])
    assert task_mean_top_k(lat, score, groups, 1) == pytest.approx((0.5 + 1.0) / 2)
    # the weighted score is decided by the slow task: (1 + 100) / (2 + 100)
    assert top_k_score(lat, score, groups, {}, 1) == pytest.approx(101 / 102)
    assert task_mean_top_k(lat, score, groups, 3) == pytest.approx(1.0)  # top 3 holds every best


def test_pairwise_accuracy_hand_computed():
    lat = np.array([1.0, 2.0, 3.0, 5.0, 6.0])
    groups = np.array([0, 0, 0, 1, 1])
    assert pairwise_accuracy(lat, -lat, groups) == pytest.approx(1.0)
    assert pairwise_accuracy(lat, lat, groups) == pytest.approx(0.0)
    # task 0 scores order (1,3,2): pairs (1,2) right, (1,3) right, (2,3) wrong; task 1 right -> 3/4
    score = np.array([3.0, 1.0, 2.0, 1.0, 0.0])
    assert pairwise_accuracy(lat, score, groups) == pytest.approx(3 / 4)
    # a constant score ties every pair: one half each, not wrong
    assert pairwise_accuracy(lat, np.zeros(5), groups) == pytest.approx(0.5)
    # task 0: scores (2, 2, 1) -> pair (1,2) tied (1/2), (1,3) right, (2,3) right; task 1 tied (1/2) -> 3/4
    assert pairwise_accuracy(lat, np.array([2.0, 2.0, 1.0, 7.0, 7.0]), groups) == pytest.approx(3 / 4)
    # ties in latency are not counted
    assert np.isnan(pairwise_accuracy(np.array([1.0, 1.0]), np.array([0.0, 1.0]), np.array([0, 0])))


def test_top_k_interval_brackets_the_score_and_collapses_when_tasks_agree():
    lat = np.array([1.0, 2.0, 4.0, 10.0, 20.0, 3.0, 6.0])
    groups = np.array([0, 0, 0, 1, 1, 2, 2])
    score = np.array([1.0, 3.0, 2.0, 5.0, 4.0, 0.0, 1.0])  # task 0 picks 2 (of 1), 1 picks 10, 2 picks 6 (of 3)
    w = {0: 1, 1: 1, 2: 1}
    point = top_k_score(lat, score, groups, w, 1)
    assert point == pytest.approx((1 + 10 + 3) / (2 + 10 + 6))
    lo, hi = top_k_interval(lat, score, groups, w, 1)
    assert lo <= point <= hi and lo < hi
    # resampling a single task's bounds: all draws give that task's ratio (here 0.5 for task 0 alone)
    one = groups == 0
    lo1, hi1 = top_k_interval(lat[one], score[one], groups[one], w, 1)
    assert lo1 == pytest.approx(0.5) and hi1 == pytest.approx(0.5)


def test_top_k_breaks_ties_in_expectation_not_by_input_order():
    from autotune.costmodel.metrics import expected_best_of_top_k, top_k_score

    lat = np.array([4.0, 1.0, 2.0, 8.0])
    score = np.array([1.0, 1.0, 1.0, 0.0])  # three programs tie for the best score
    # top-1: each of the three tied programs equally likely: (4 + 1 + 2) / 3
    assert expected_best_of_top_k(lat, score, 1) == pytest.approx(7 / 3)
    # top-2 from the three tied: pairs {4,1},{4,2},{1,2} -> best 1, 2, 1
    assert expected_best_of_top_k(lat, score, 2) == pytest.approx(4 / 3)
    assert expected_best_of_top_k(lat, score, 3) == pytest.approx(1.0)
    # one strictly above the tie: it is always in; the second pick is one of the tied ones
    score2 = np.array([2.0, 1.0, 1.0, 0.0])
    assert expected_best_of_top_k(lat, score2, 2) == pytest.approx((min(4, 1) + min(4, 2)) / 2)
    # the order of the programs no longer matters, and float noise below the tolerance is a tie
    perm = np.array([2, 0, 3, 1])
    groups = np.zeros(4, np.int64)
    a = top_k_score(lat, score, groups, {0: 1.0}, 1)
    b = top_k_score(lat[perm], score[perm] + np.array([1e-9, 0, 0, 2e-9]), groups, {0: 1.0}, 1)
    assert a == pytest.approx(b) == pytest.approx(1.0 / (7 / 3))
    # without ties: the usual top-k
    assert expected_best_of_top_k(lat, np.array([0.1, 0.5, 0.9, 0.2]), 1) == 2.0


def test_timed_in_turns_rotates_the_order_and_times_every_call():
    from autotune.costmodel.metrics import timed_in_turns

    order, after = [], []
    calls = {n: (lambda n=n: order.append(n)) for n in ("a", "b", "c")}
    seconds = timed_in_turns(calls, 4, lambda: after.append(len(order)))
    assert order == ["a", "b", "c", "b", "c", "a", "c", "a", "b", "a", "b", "c"]
    assert after == [3, 6, 9, 12]  # after each round, never inside the timed calls
    assert {n: len(s) for n, s in seconds.items()} == {"a": 4, "b": 4, "c": 4}
    assert all(t >= 0 for s in seconds.values() for t in s)
