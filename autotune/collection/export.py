"""``python -m autotune.collection.export DATASET OUT``: a dataset as a stock MetaSchedule JSONDatabase.

Stock XGBModel/MLPModel (and ``compile_relax``) can then use the same data. Failed rows are
exported with MetaSchedule's failure marker (``FAILED_RUN_SECS``) unless ``--valid-only``.
"""

from __future__ import annotations

import argparse
import os

from autotune.cli import run_main
from autotune.errors import UserError


def export_dataset(root: str, out_dir: str, valid_only: bool = False) -> int:
    from autotune.collection.taskpool import task_module
    from autotune.data.store import DatasetError, read_manifest, read_records, read_tasks
    from autotune.tvmrt.database import check_committed, open_json_database, record_from_row

    try:
        manifest = read_manifest(root)
        table = read_records(root, valid_only=valid_only)
    except DatasetError as err:
        raise UserError(str(err)) from None
    tasks = read_tasks(root)
    target = manifest["hardware"]["target"]
    db = open_json_database(out_dir)
    workloads = {}
    n = 0
    for key, trace, secs in zip(table.column("task_key").to_pylist(), table.column("trace").to_pylist(),
                                table.column("run_secs").to_pylist()):
        if key not in workloads:
            workloads[key] = db.commit_workload(task_module(tasks[key]))
        db.commit_tuning_record(record_from_row(trace, secs, target, tasks[key]["args_info"], workloads[key]))
        n += 1
    check_committed(out_dir, n)  # TVM ignores write errors (a full disk): count the lines
    return n


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m autotune.collection.export", description=__doc__.split("\n\n")[0])
    ap.add_argument("dataset")
    ap.add_argument("out", help="folder for database_workload.json / database_tuning_record.json")
    ap.add_argument("--valid-only", action="store_true")
    args = ap.parse_args(argv)

    def body() -> int:
        if os.path.exists(os.path.join(args.out, "database_tuning_record.json")):
            raise UserError(f"{args.out} already holds a database; choose an empty folder")
        n = export_dataset(args.dataset, args.out, args.valid_only)
        print(f"exported {n} records to {args.out}")
        return 0

    return run_main(body)


if __name__ == "__main__":
    raise SystemExit(main())
