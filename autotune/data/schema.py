"""The on-disk format of a measured-program dataset (read without TVM).

A dataset is a folder:

    manifest.json            schema version, TVM/ffi versions, hardware fingerprint, target,
                             counts, sha256 of every shard
    tasks.jsonl              one task a line: key, workload hash, workload (MetaSchedule
                             Workload JSON: [shash, base64 IRModule]), TVMScript, FLOPs, weight,
                             model tags, args_info, name
    shards/part-NNNNN.parquet  measured programs, one row each (RECORD_SCHEMA)
    journal.jsonl            rows measured since the last shard (fsynced per batch); compacted
                             into a shard when it grows, so a kill loses at most the batch in flight
"""

from __future__ import annotations

import pyarrow as pa

SCHEMA_VERSION = 1

STATUS_OK = "ok"
STATUSES = ("ok", "build_error", "build_timeout", "run_error", "run_timeout")

RECORD_SCHEMA = pa.schema(
    [
        ("task_key", pa.string()),  # "<workload_hash>" (one task per distinct workload)
        ("workload_hash", pa.string()),
        ("trace", pa.string()),  # MetaSchedule trace JSON: [instructions, decisions]
        ("run_secs", pa.list_(pa.float64())),  # every repeat; empty when the program failed
        ("status", pa.string()),
        ("error", pa.string()),  # first 500 characters of the error, "" when ok
        ("sampler", pa.string()),  # "random" | "evolutionary" | ...
        ("hardware_id", pa.string()),
        ("timestamp", pa.float64()),  # unix seconds when measured
    ]
)

RECORD_FIELDS = tuple(RECORD_SCHEMA.names)
