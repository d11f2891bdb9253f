"""Tasks -> search -> measure -> database: the tuning loop (``tuner``), one whole-model session
(``session``), and the adapters MetaSchedule's search calls (``search_costmodel``, ``optuna_search``).
TVM side."""
