"""Active learning: which programs to measure (TVM-free). One contract (``base.Sampler``), several samplers.

    from autotune.costmodel.sampling import Pool, create
    pool = Pool(batch, groups)                       # candidates and their task ids
    picked = create("rdu").select(pool, measured, model, k=100, rng=0)

Samplers: random, random-per-task, uncertainty, diversity, representativeness, rdu (TCL), topk-biased
(BALTO). ``BootstrapEnsemble`` gives any cost model the spread that uncertainty needs.
"""

from __future__ import annotations

from .base import Pool, Sampler, task_quotas
from .ensemble import BootstrapEnsemble
from .samplers import (
    DiversitySampler,
    RandomSampler,
    RDUSampler,
    RepresentativenessSampler,
    TaskRandomSampler,
    TopKBiasedSampler,
    UncertaintySampler,
)

REGISTRY: dict[str, type[Sampler]] = {
    cls.name: cls
    for cls in (
        RandomSampler,
        TaskRandomSampler,
        UncertaintySampler,
        DiversitySampler,
        RepresentativenessSampler,
        RDUSampler,
        TopKBiasedSampler,
    )
}


def create(name: str, **params) -> Sampler:
    if name not in REGISTRY:
        raise ValueError(f"unknown sampler {name!r}; valid: {', '.join(REGISTRY)}")
    try:
        return REGISTRY[name](**params)
    except TypeError:
        import inspect

        valid = [p for p in inspect.signature(REGISTRY[name].__init__).parameters if p != "self"]
        raise ValueError(
            f"sampler {name!r}: unknown parameter in {sorted(params)}; valid: {valid or 'none'}"
        ) from None


__all__ = ["Pool", "Sampler", "REGISTRY", "create", "task_quotas", "BootstrapEnsemble"]
