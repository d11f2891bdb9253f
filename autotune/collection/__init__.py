"""Building datasets with TVM: the task pool (``taskpool``), the collector (``collector``), feature
extraction into a dataset's cache (``features``) and export to a stock JSONDatabase (``export``).
The learning side (``autotune.data``, ``autotune.costmodel``) reads what these write, without TVM."""
