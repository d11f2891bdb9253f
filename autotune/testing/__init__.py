"""Contract test suites shipped with the package (Optuna's ``optuna/testing`` habit).

Each family of pluggable strategies has one suite here; tests/ parametrize it over every
registered implementation, so a new strategy is checked by registering it:

- ``online_update``: every ``autotune.costmodel.online.ONLINE_UPDATES`` strategy (TVM-free);
- ``search``: every ``autotune.tuning.search.SEARCH_KINDS`` search kind (real TVM, no measuring);
- ``sampling``: every ``autotune.costmodel.sampling.REGISTRY`` active-learning sampler (TVM-free);
- ``programs``: synthetic labelled programs for TVM-free cost-model tests.
"""
