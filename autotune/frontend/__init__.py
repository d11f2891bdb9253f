"""Model -> tasks: resolve ``--model`` (``models``, TVM-free) and import it into Relax, fuse and
extract MetaSchedule tasks, compile with a database (``relax``, TVM side)."""
