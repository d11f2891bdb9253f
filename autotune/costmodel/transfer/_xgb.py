"""XGBoost side of transfer: warm-started boosting with pseudo-labelled distillation groups."""

from __future__ import annotations

import numpy as np
import xgboost as xgb

from ..online import rank01
from .base import Programs


def distill_boost(source, target: Programs, pools: list[tuple[Programs, float]], teacher: list[np.ndarray],
                  rounds: int, seed: int) -> xgb.Booster:
    """``rounds`` boosting rounds from ``source.booster_`` (a ranking ``XGBCostModel``) on the target
    query groups (labels: measured y, group weight 1) and on every pool's task groups labelled with the
    teacher's within-task rank in [0, 1] (group weight: the pool's weight). The new trees fit what the target
    changes while the pseudo-labelled groups pull toward the teacher's order elsewhere."""
    feats, labels, qid, group_w = [target.batch.packsum()], [np.asarray(target.y, np.float64)], [], []
    tg = np.unique(target.groups, return_inverse=True)[1]
    qid.append(tg)
    group_w.append(np.ones(tg.max() + 1))
    base = tg.max() + 1
    for (pool, weight), scores in zip(pools, teacher):
        g = np.unique(pool.groups, return_inverse=True)[1]
        pseudo = np.zeros(len(pool))
        for k in np.unique(g):
            m = g == k
            pseudo[m] = rank01(scores[m])
        feats.append(pool.batch.packsum())
        labels.append(pseudo)
        qid.append(g + base)
        group_w.append(np.full(g.max() + 1, float(weight)))
        base += g.max() + 1
    q = np.concatenate(qid)
    order = np.argsort(q, kind="stable")
    dtrain = xgb.DMatrix(np.concatenate(feats)[order], label=np.concatenate(labels)[order])
    present, counts = np.unique(q[order], return_counts=True)
    dtrain.set_group(counts)
    dtrain.set_weight(np.concatenate(group_w)[present])
    params = {**source._params(), "seed": seed, "seed_per_iteration": True}  # continued boosters do not reseed
    return xgb.train(params, dtrain, num_boost_round=rounds, xgb_model=source.booster_.copy())
