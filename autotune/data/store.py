"""Append-only, crash-safe storage of measured programs: journal + Parquet shards + manifest."""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import time
from collections.abc import Iterable
from dataclasses import dataclass, field

import pyarrow as pa
import pyarrow.parquet as pq

from autotune.errors import UserError

from .schema import RECORD_FIELDS, RECORD_SCHEMA, SCHEMA_VERSION, STATUS_OK

MANIFEST = "manifest.json"
TASKS = "tasks.jsonl"
JOURNAL = "journal.jsonl"
SHARD_DIR = "shards"


class DatasetError(UserError, ValueError):
    """A dataset file is missing, corrupt or from an incompatible schema (message names the file).

    A UserError: a CLI that lets it through still prints one line and exits 2 (autotune.cli.run_main)."""


def _fsync_write(path: str, data: bytes, mode: str = "ab") -> None:
    with open(path, mode) as f:
        f.write(data)
        f.flush()
        os.fsync(f.fileno())


def _atomic_write(path: str, data: bytes) -> None:
    tmp = path + ".tmp"
    _fsync_write(tmp, data, "wb")
    os.replace(tmp, path)


def _sha256(path: str) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def read_jsonl(path: str) -> list:
    """Rows of a JSON-lines file ([] if it does not exist); a torn *last* line (a writer killed
    mid-write) is skipped, corruption elsewhere raises DatasetError naming the file and line.
    The one JSON-lines reader of autotune (datasets, GPU bundles, GPU timing results)."""
    if not os.path.exists(path):
        return []
    with open(path, "rb") as f:
        lines = f.read().split(b"\n")
    rows = []
    for i, line in enumerate(lines):
        if not line.strip():
            continue
        try:
            rows.append(json.loads(line))
        except ValueError:
            if i >= len(lines) - 2:  # the last non-empty line: a writer was killed mid-write
                break
            raise DatasetError(f"{path}: corrupt JSON on line {i + 1}") from None
    return rows


@dataclass
class TaskInfo:
    key: str
    name: str
    workload_hash: str
    workload: list  # MetaSchedule Workload JSON [shash, base64 IRModule]
    tvmscript: str
    flops: float
    weight: int  # occurrences in the first model it was extracted from; use model_weights per model
    models: list[str]
    args_info: list
    source: str  # "zoo" | "synthetic"
    # model -> how often the task occurs in THAT model (a task shared by two models carries a different
    # weight in each: TenSet/TLP's top-k score and a model's latency sum need the model's own count)
    model_weights: dict[str, int] = field(default_factory=dict)

    def as_json(self) -> dict:
        return dict(self.__dict__)


class DatasetWriter:
    """Appends measured rows; compacts the journal into a shard every ``shard_rows`` rows."""

    def __init__(self, root: str, fingerprint: dict, shard_rows: int = 4096):
        self.root = root
        self.shard_rows = shard_rows
        os.makedirs(os.path.join(root, SHARD_DIR), exist_ok=True)
        manifest_path = os.path.join(root, MANIFEST)
        if os.path.exists(manifest_path):
            self.manifest = read_manifest(root)
            old = self.manifest.get("hardware", {}).get("hardware_id")
            if old and old != fingerprint.get("hardware_id"):
                raise DatasetError(
                    f"{manifest_path}: dataset was measured on {old}, not {fingerprint.get('hardware_id')}; "
                    "use another --out"
                )
        else:
            self.manifest = {
                "schema_version": SCHEMA_VERSION,
                "created": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
                "hardware": fingerprint,
                "shards": {},
                "counts": {},
            }
            self._write_manifest()
        self._journal_rows = self._repair_journal()

    def _repair_journal(self) -> int:
        """Rewrite the journal without a torn last line, or empty it when a run was killed between
        compacting it into a shard (manifest written) and emptying it. Returns its rows."""
        path = os.path.join(self.root, JOURNAL)
        rows = read_jsonl(path)
        if _journal_in_last_shard(self.root, self.manifest, rows):
            rows = []
        if os.path.exists(path):
            _atomic_write(path, b"".join(json.dumps(r).encode() + b"\n" for r in rows))
        return len(rows)

    def known_tasks(self) -> dict[str, dict]:
        return {t["key"]: t for t in read_jsonl(os.path.join(self.root, TASKS))}

    def add_task(self, task: TaskInfo) -> None:
        if task.key in self.known_tasks():
            return
        _fsync_write(os.path.join(self.root, TASKS), json.dumps(task.as_json()).encode() + b"\n")

    def append(self, rows: Iterable[dict]) -> None:
        data = b""
        n = 0
        for row in rows:
            missing = [f for f in RECORD_FIELDS if f not in row]
            if missing:
                raise ValueError(f"row is missing fields {missing}")
            data += json.dumps({f: row[f] for f in RECORD_FIELDS}).encode() + b"\n"
            n += 1
        if n:
            _fsync_write(os.path.join(self.root, JOURNAL), data)
            self._journal_rows += n
        if self._journal_rows >= self.shard_rows:
            self.compact()

    def compact(self) -> None:
        """Move the journal's rows into a new Parquet shard (atomic), then empty the journal."""
        journal = os.path.join(self.root, JOURNAL)
        rows = read_jsonl(journal)
        if not rows:
            return
        index = len(self.manifest["shards"])
        name = f"{SHARD_DIR}/part-{index:05d}.parquet"
        path = os.path.join(self.root, name)
        table = pa.Table.from_pylist(rows, schema=RECORD_SCHEMA)
        pq.write_table(table, path + ".tmp", compression="zstd")
        os.replace(path + ".tmp", path)
        self.manifest["shards"][name] = {"rows": len(rows), "sha256": _sha256(path)}
        self._write_manifest()
        _atomic_write(journal, b"")
        self._journal_rows = 0

    def _write_manifest(self) -> None:
        _atomic_write(os.path.join(self.root, MANIFEST), json.dumps(self.manifest, indent=2).encode())

    def update_counts(self) -> None:
        table = read_records(self.root, verify=False)
        status = table.column("status").to_pylist()
        self.manifest["counts"] = {
            "records": len(status),
            "valid": sum(1 for s in status if s == STATUS_OK),
            "tasks": len(set(table.column("task_key").to_pylist())),
        }
        self.manifest["updated"] = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
        self._write_manifest()

    def close(self) -> None:
        self.compact()
        self.update_counts()


def _journal_in_last_shard(root: str, manifest: dict, rows: list[dict]) -> bool:
    """True when ``rows`` (the journal) are exactly the newest shard: compacted, not yet emptied."""
    if not rows or not manifest.get("shards"):
        return False
    name = max(manifest["shards"])
    if manifest["shards"][name].get("rows") != len(rows):
        return False
    try:
        shard = pq.read_table(os.path.join(root, name), schema=RECORD_SCHEMA).to_pylist()
    except Exception:  # noqa: BLE001 - an unreadable shard is reported by read_records, not here
        return False
    return shard == [{f: r.get(f) for f in RECORD_FIELDS} for r in rows]


def portable_path(path: str) -> str:
    """How a card records a dataset or model folder: relative to the working directory (the repository root,
    where every command runs) when it lies under it, so a card means the same folder in another clone;
    absolute otherwise."""
    full, here = os.path.abspath(path), os.path.abspath(os.curdir)
    return os.path.relpath(full, here) if full.startswith(here + os.sep) else full


def recorded_dataset(path: str | None) -> str | None:
    """A dataset folder as a card recorded it, found here: as written, or (a card written in another clone,
    with an absolute path) the folder of the same name under ``datasets/``. None when neither exists."""
    if not path:
        return None
    if os.path.isdir(path):
        return path
    here = os.path.join("datasets", os.path.basename(os.path.normpath(path)))
    return here if os.path.isdir(here) else None


def read_manifest(root: str) -> dict:
    path = os.path.join(root, MANIFEST)
    try:
        with open(path, encoding="utf-8") as f:
            manifest = json.load(f)
    except (FileNotFoundError, NotADirectoryError):
        raise DatasetError(f"{path}: not found; is {root} a dataset folder?") from None
    except ValueError as err:
        raise DatasetError(f"{path}: corrupt manifest ({err})") from None
    expected = "a JSON object with schema_version, hardware and shards, as autotune.collect writes"
    if not isinstance(manifest, dict):
        raise DatasetError(f"{path}: not a dataset manifest (expected {expected})")
    if manifest.get("schema_version") != SCHEMA_VERSION:
        raise DatasetError(
            f"{path}: schema version {manifest.get('schema_version')}, this autotune reads {SCHEMA_VERSION}"
        )
    if not isinstance(manifest.get("hardware"), dict) or not isinstance(manifest.get("shards"), dict):
        raise DatasetError(f"{path}: not a dataset manifest (expected {expected})")
    return manifest


def read_tasks(root: str) -> dict[str, dict]:
    return {t["key"]: t for t in read_jsonl(os.path.join(root, TASKS))}


def task_weight(task: dict, model: str) -> int:
    """How often ``task`` (a tasks.jsonl row) occurs in ``model``. Datasets written before per-model
    weights existed are refused with the command that adds them (their one ``weight`` is the count
    in whichever model was extracted first, wrong for the others)."""
    weights = task.get("model_weights")
    if not weights:
        raise DatasetError(
            f"task {task.get('name')} has no per-model weights (dataset from before schema 1.1); "
            "add them with python -m autotune.collection.reweigh DATASET"
        )
    if model not in weights:
        raise KeyError(f"task {task.get('name')} does not occur in model {model!r} (it occurs in {sorted(weights)})")
    return int(weights[model])


def write_tasks(root: str, tasks: Iterable[dict]) -> None:
    """Rewrite tasks.jsonl atomically (used to add derived fields such as per-model weights)."""
    _atomic_write(os.path.join(root, TASKS), b"".join(json.dumps(t).encode() + b"\n" for t in tasks))


def read_records(root: str, verify: bool = True, valid_only: bool = False) -> pa.Table:
    """All rows (shards + journal) as one Arrow table. ``verify`` checks each shard's sha256."""
    manifest = read_manifest(root)
    tables = []
    for name, info in sorted(manifest["shards"].items()):
        path = os.path.join(root, name)
        if not os.path.exists(path):
            raise DatasetError(f"{path}: shard listed in the manifest is missing")
        if verify and _sha256(path) != info["sha256"]:
            raise DatasetError(f"{path}: sha256 mismatch (corrupt or truncated shard); re-collect or restore it")
        try:
            tables.append(pq.read_table(path, schema=RECORD_SCHEMA))
        except Exception as err:  # pyarrow raises several types for broken files
            raise DatasetError(f"{path}: unreadable Parquet shard ({type(err).__name__}: {err})") from None
    journal = read_jsonl(os.path.join(root, JOURNAL))
    if journal and not _journal_in_last_shard(root, manifest, journal):
        tables.append(pa.Table.from_pylist(journal, schema=RECORD_SCHEMA))
    table = pa.concat_tables(tables) if tables else RECORD_SCHEMA.empty_table()
    if valid_only:
        table = table.filter(pa.compute.equal(table.column("status"), STATUS_OK))
    return table


def mean_latency(table: pa.Table):
    """Mean of each row's repeats (NaN for failed rows) as a numpy array."""
    import numpy as np

    out = np.full(table.num_rows, np.nan)
    for i, secs in enumerate(table.column("run_secs").to_pylist()):
        if secs:
            with contextlib.suppress(ZeroDivisionError):
                out[i] = sum(secs) / len(secs)
    return out
