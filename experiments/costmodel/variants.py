"""Exploratory variants of the cost models, scored like `make train-costmodel` (issue 12's search for a
better model), without touching `models/` or the comparison.

    python experiments/costmodel/variants.py --spec 'lstm64:seq:{"mixer": "lstm", "d_model": 64}' --seeds 0,1,2
    python experiments/costmodel/variants.py --table-only

Each ``--spec`` is ``name:kind:json`` (a registered kind and keyword overrides). Every (spec, seed) fit is
fitted without the test networks and the validation networks (``--validation-models``, one per family) and
evaluated on the validation networks in the views ``all`` and ``search`` (a choice among variants reads these;
the test networks are never read here: ``splits.selection()``), and appended as one JSON line to
``--out`` (resumable: a (name, seed) already there is skipped); the markdown table (mean ± sd over the seeds
of each name) is rewritten from the whole file. A variant that wins here is registered and trained by
`make train-costmodel` before it counts.

Every fit is saved (``--models-dir``, default ``runs/variants/<name>/seed<k>``), so seed ensembles can be
scored from fits already made: ``--seed-ensemble cosx3=cos:3`` groups the saved fits of variant ``cos``
as the registered ``EnsembleCostModel`` with a kind repeated 3 times would fit them (ensemble seed ``s`` =
member seeds ``3s .. 3s+2``), puts each member on its within-task scale of the training programs, as its
``fit`` does, and scores the ensemble like any row (one row per ensemble seed whose members are all saved).
``--soups 1,5`` (a spec with ``"soup": 5`` or more) adds rows ``<name>+soup1`` and ``<name>+soup5`` scored from the
same fit: its 1 (the best epoch alone) and 5 best validation epochs' weights averaged whatever validation says
(``TorchRankerModel.soup_of``), so the rows pair with each other exactly: same fit, no seed noise between them.
``--committee rowsxms=seq-lstm-rows+ms-xgb`` scores, for every seed in ``--seeds`` that all its members have saved
(``--models-dir``/<member>/seed<k>: a variant's fits, or ``python -m autotune.costmodel.train --save-seeds DIR``'s),
the committee of those fits as the registered ``ensemble`` kind would combine them (each on its within-task scale of
the training programs, averaged); one member (``rows=seq-lstm-rows``) scores that saved fit alone, so a committee
pairs with its members (``--pair rowsxms=rows``) without a fit.
``--threads 1`` fits with one thread: the LSTM trains as fast on one core as on two here, so two processes
with different ``--seeds`` make twice the fits in the same time.
"""

from __future__ import annotations

import argparse
import json
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")  # before torch loads

import numpy as np  # noqa: E402

from autotune.cli import check_threads, comma_list, git_commit, host_cpu, run_main, seed_list, setup_logging  # noqa: E402
from autotune.data import splits  # noqa: E402
from autotune.errors import UserError  # noqa: E402

METRICS = ("all_top1", "all_top5", "all_pairwise", "search_top1", "search_top5")


def parse_spec(spec: str) -> tuple[str, str, dict]:
    from autotune.costmodel import REGISTRY

    parts = spec.split(":", 2)
    if len(parts) != 3 or not parts[0]:
        raise UserError(f"--spec {spec!r}: expected name:kind:json, e.g. 'lstm64:seq:{{\"mixer\": \"lstm\"}}'")
    name, kind, raw = parts
    if kind not in REGISTRY:
        raise UserError(f"--spec {spec!r}: unknown kind {kind!r}; valid: {', '.join(REGISTRY)}")
    try:
        params = json.loads(raw or "{}")
    except ValueError as err:
        raise UserError(f"--spec {spec!r}: the keywords are not JSON ({err})") from None
    if not isinstance(params, dict):
        raise UserError(f"--spec {spec!r}: the keywords must be a JSON object")
    from autotune.costmodel import create

    try:  # a bad keyword or value is refused here, before any fit, not by a traceback after the split is loaded
        create(kind, **params)
    except (TypeError, ValueError) as err:
        raise UserError(f"--spec {spec!r}: {err}") from None
    return name, kind, params


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python experiments/costmodel/variants.py", description=__doc__.split("\n\n")[0])
    ap.add_argument("--dataset", default=os.path.join(ROOT, "datasets", "cpu-znver3-2c"))
    ap.add_argument("--spec", action="append", default=[], help="name:kind:json (repeat)")
    ap.add_argument("--seeds", default="0,1,2")
    ap.add_argument("--held-out", default=None,
                    help="the test networks, dropped before anything is read (default: the comparison's)")
    ap.add_argument("--validation-models", default=",".join(splits.VALIDATION_MODELS),
                    help="training networks set aside and scored (default: %(default)s)")
    ap.add_argument("--out", default=os.path.join(HERE, "results", "variants_validation.jsonl"),
                    help="rows scored on the validation networks (variants.jsonl: the rows scored on the test "
                         "networks before issue 47, kept as the record of how earlier choices were made)")
    ap.add_argument("--table-only", action="store_true", help="only rewrite the markdown table from --out")
    ap.add_argument("--models-dir", default=os.path.join(ROOT, "runs", "variants"),
                    help="where each fit is saved, <dir>/<name>/seed<k> (default: %(default)s)")
    ap.add_argument("--seed-ensemble", action="append", default=[],
                    help="NAME=VARIANT:N: score seed ensembles of N saved fits of VARIANT (repeat)")
    ap.add_argument("--committee", action="append", default=[], metavar="NAME=A+B",
                    help="score committees of saved fits of different variants or kinds, seed by seed (repeat; one "
                         "member scores that fit alone)")
    ap.add_argument("--threads", type=int, default=None, help="threads per fit (default: the kind's)")
    ap.add_argument("--pair", action="append", default=[], metavar="A=B",
                    help="add the paired difference A - B over their common seeds to the table (repeat)")
    ap.add_argument("--soups", default="", help="K,K,...: also score each torch fit's K best validation epochs "
                    "averaged (rows <name>+soup<K>; the spec needs \"soup\" >= the largest K)")
    args = ap.parse_args(argv)
    return run_main(lambda: _selected(args))


def _selected(args) -> int:
    with splits.selection():  # the test split raises in here (splits.TestSplitForbidden)
        return _main(args)


def _main(args) -> int:
    specs = [parse_spec(s) for s in args.spec]
    ensembles = [parse_ensemble(e) for e in args.seed_ensemble]
    committees = [parse_committee(c) for c in args.committee]
    for _name, members, text in committees:  # refused before the split is loaded
        missing = [m for m in members if not os.path.isdir(os.path.join(args.models_dir, m))]
        if missing and not args.table_only:
            raise UserError(f"--committee {text!r}: no saved fits of {missing[0]!r} under {args.models_dir} "
                            "(variants.py fits, or train.py --save-seeds)")
    seeds = seed_list(args.seeds)
    raw = args.soups
    try:
        args.soups = sorted({int(k) for k in raw.split(",") if k.strip()})
    except ValueError:
        raise UserError(f"--soups {raw!r}: expected numbers of epochs, e.g. 1,3,5") from None
    if any(k < 1 for k in args.soups):
        raise UserError(f"--soups {raw!r}: every K must be 1 or more")
    for name, _, params in specs if args.soups else []:
        if not isinstance(params.get("soup"), int) or params["soup"] < max(args.soups):
            raise UserError(f"--soups {raw!r}: spec {name!r} keeps {params.get('soup', 0)} epochs' weights; "
                            f"give it \"soup\": {max(args.soups)} or more")
    check_threads(args.threads)
    if (specs or ensembles or committees) and not args.table_only:
        setup_logging()
        split = _split(args)  # loaded once for the fits and the ensembles
        _run(args, specs, seeds, split)
        _run_ensembles(args, ensembles, split)
        _run_committees(args, committees, seeds, split)
    rows = _read(args.out)
    pairs = [parse_pair(p, rows) for p in args.pair]
    md = os.path.splitext(args.out)[0] + ".md"
    text = markdown(rows, pairs)
    with open(md, "w", encoding="utf-8") as f:
        f.write(text)
    print(text)
    return 0


def parse_pair(text: str, rows: list[dict]) -> tuple[str, str]:
    a, sep, b = text.partition("=")
    names = {r["name"] for r in rows}
    if not (sep and a and b):
        raise UserError(f"--pair {text!r}: expected A=B, two variant names, e.g. 'cos62+soup5=cos62+soup1'")
    for n in (a, b):
        if n not in names:
            raise UserError(f"--pair {text!r}: no rows named {n!r} in the results; names: {', '.join(sorted(names))}")
    return a, b


def paired_lines(rows: list[dict], pairs: list[tuple[str, str]]) -> list[str]:
    """Per pair: the difference a − b of each metric over the seeds both have (mean ± sd, seeds a is ahead)."""
    if not pairs:
        return []
    lines = ["", "## Paired differences (a − b over the seeds both have)", "",
             "| a − b | seeds | top-1 all | top-5 all | pairwise all | top-1 search | top-1 ahead in |", "|---|---|---|---|---|---|---|"]
    by = {(r["name"], r["seed"]): r for r in rows}
    for a, b in pairs:
        seeds = sorted(s for (n, s) in by if n == a and (b, s) in by)
        if not seeds:
            lines.append(f"| {a} − {b} | none in common | | | | | |")
            continue

        def diff(key, seeds=seeds, a=a, b=b):
            return np.array([by[(a, s)][key] - by[(b, s)][key] for s in seeds])

        def cell(key):
            d = diff(key)
            return f"{d.mean():+.3f}" + (f" ± {d.std(ddof=1):.3f}" if len(d) > 1 else "")

        ahead = int((diff("all_top1") > 0).sum())
        lines.append(f"| {a} − {b} | {','.join(map(str, seeds))} | {cell('all_top1')} | {cell('all_top5')} | "
                     f"{cell('all_pairwise')} | {cell('search_top1')} | {ahead}/{len(seeds)} |")
    return lines


def parse_ensemble(text: str) -> tuple[str, str, int]:
    name, sep, rest = text.partition("=")
    variant, sep2, n = rest.rpartition(":")
    if not (sep and sep2 and name and variant and n.isdigit() and int(n) >= 2):
        raise UserError(f"--seed-ensemble {text!r}: expected NAME=VARIANT:N with N >= 2, e.g. 'cosx3=cos:3'")
    return name, variant, int(n)


def parse_committee(text: str) -> tuple[str, list[str], str]:
    name, sep, rest = text.partition("=")
    members = rest.split("+")
    if not (sep and name and all(members)):
        raise UserError(f"--committee {text!r}: expected NAME=A+B (saved variants or kinds under --models-dir), "
                        "e.g. 'rowsxms=seq-lstm-rows+ms-xgb'")
    return name, members, text


def _run_committees(args, committees, seeds, split) -> None:
    """``--committee``: per seed, the saved fits of every member at that seed combined as ``EnsembleCostModel``
    combines its members (``from_fitted``: each on its within-task scale of the training programs), or with one
    member that fit alone; scored like a fitted row. A seed some member has not saved is skipped (logged)."""
    if not committees:
        return
    from autotune.costmodel import load, registered_kind
    from autotune.costmodel.ensemble import EnsembleCostModel
    from autotune.costmodel.evaluate import evaluate

    data, train, test_keys = split
    rows = {(r["name"], r["seed"]): r for r in _read(args.out)}
    for name, members, _text in committees:
        for seed in seeds:
            paths = [os.path.join(args.models_dir, m, f"seed{seed}") for m in members]
            if (name, seed) in rows:
                continue
            if not all(os.path.isdir(p) for p in paths):
                print(f"--committee {name}: seed {seed} skipped (not every member has saved it)", file=sys.stderr)
                continue
            for p in paths:
                _check_fitted_without(p, test_keys)
            fitted = [load(p) for p in paths]
            model = fitted[0] if len(fitted) == 1 else EnsembleCostModel.from_fitted(fitted, train.batch, train.groups,
                                                                                      seed=seed)
            kind = registered_kind(model)
            fit_s = sum(rows.get((m, seed), {}).get("fit_s", float("nan")) for m in members)
            _append(args, _row(name, kind, {"members": [registered_kind(m) for m in fitted], "of": members}, seed,
                               evaluate(model, data, test_keys), test_keys, args.dataset, fit_s=fit_s,
                               train_programs=len(train)))


FITTED_ON = "fitted_on.json"  # beside a saved fit: which networks it was fitted without


def _mark_fitted_without(path: str, scored: dict) -> None:
    """Record that the fit at ``path`` never saw the networks it is scored on here (the validation networks)."""
    with open(os.path.join(path, FITTED_ON), "w", encoding="utf-8") as f:
        json.dump({"left_out_networks": sorted(scored)}, f)


def _check_fitted_without(path: str, scored: dict) -> None:
    """A committee member scored on validation networks must have been fitted without them: a fit of
    ``train.py --save-seeds`` saw every training network, so its validation score would be a training score."""
    try:
        with open(os.path.join(path, FITTED_ON), encoding="utf-8") as f:
            left_out = set(json.load(f)["left_out_networks"])
    except (OSError, ValueError, KeyError):
        left_out = set()
    if not set(scored) <= left_out:
        raise UserError(f"--committee: {path} was not fitted without {', '.join(sorted(set(scored) - left_out))} "
                        f"(no {FITTED_ON} saying so: train.py --save-seeds fits see every training network); fit the "
                        "member with variants.py first")


def _read(path: str) -> list[dict]:
    if not os.path.exists(path):
        return []
    with open(path, encoding="utf-8") as f:
        return [json.loads(line) for line in f if line.strip()]


def _split(args) -> tuple:
    """(data, fit programs, validation network -> task keys) of ``--dataset``: the test networks dropped
    (``--held-out``, default the comparison's), the ``--validation-models`` set aside and scored, never fitted on."""
    from autotune.costmodel.data import load_selection_split

    held = args.held_out.split(",") if args.held_out else None
    data, fit_keys, val_keys = load_selection_split(args.dataset, held, comma_list(args.validation_models))
    return data, data.select_tasks(fit_keys), val_keys


def _run(args, specs, seeds, split) -> None:
    from autotune.costmodel.train import train_seeds

    done = {(r["name"], r["seed"]) for r in _read(args.out)}
    data, train, test_keys = split
    os.makedirs(os.path.dirname(os.path.abspath(args.out)), exist_ok=True)
    for name, kind, params in specs:
        for seed in seeds:
            if (name, seed) in done:
                continue
            fits = train_seeds(kind, params, [seed], train, data, test_keys, threads=args.threads)  # one fit, scored as the comparison
            fits["model"].save(os.path.join(args.models_dir, name, f"seed{seed}"))
            _mark_fitted_without(os.path.join(args.models_dir, name, f"seed{seed}"), test_keys)
            _append(args, _row(name, kind, params, seed, fits["runs"][0], test_keys, args.dataset,
                               fit_s=fits["fit_seconds"][0], history=getattr(fits["model"], "history_", None),
                               train_programs=len(train)))
            _run_soups(args, name, kind, params, seed, fits, split)


def _run_soups(args, name, kind, params, seed, fits, split) -> None:
    """``--soups``: rows ``<name>+soup<k>`` from the fit just made, its ``k`` best validation epochs' weights
    averaged whatever validation says (``soup_of``; k = 1 is the best epoch alone), paired with ``<name>``
    exactly: same fit, same seed."""
    from autotune.costmodel.evaluate import evaluate

    data, train, test_keys = split
    model = fits["model"]
    held = len(getattr(model, "soup_candidates_", None) or [])
    for k in [k for k in args.soups if k <= held]:  # fewer candidates: validation ran fewer epochs than k
        soup = model.soup_of(k)
        _append(args, _row(f"{name}+soup{k}", kind, {**params, "soup_of": k}, seed, evaluate(soup, data, test_keys),
                           test_keys, args.dataset, fit_s=fits["fit_seconds"][0], history=soup.history_,
                           train_programs=len(train)))


def _row(name, kind, params, seed, result, test_keys, dataset, **extra) -> dict:
    views = result["views"]
    return {"name": name, "kind": kind, "params": params, "seed": seed, **extra,
            **{f"{v}_{k}": views[v]["mean"][k] for v in ("all", "search") for k in ("top1", "top5", "pairwise")},
            "per_model_top1": {n: views["all"][n]["top1"] for n in test_keys},
            "dataset": os.path.relpath(dataset, ROOT), "measured_on": host_cpu(), "git_commit": git_commit()}


def _append(args, row: dict) -> None:
    with open(args.out, "a", encoding="utf-8") as f:  # one line per write: two processes may share the file
        f.write(json.dumps(row) + "\n")


def _run_ensembles(args, ensembles, split) -> None:
    """Seed ensembles of saved fits: ensemble seed ``s`` of N copies = the variant's fits with seeds N·s .. N·s+N-1
    (``EnsembleCostModel.member_seeds``), each member centred and scaled on the training programs as ``fit``
    does, scored in the same views as a fitted row. Ensemble seeds whose members are not all saved are skipped."""
    if not ensembles:
        return
    from autotune.costmodel import load, registered_kind
    from autotune.costmodel.ensemble import EnsembleCostModel
    from autotune.costmodel.evaluate import evaluate

    data, train, test_keys = split
    rows = {(r["name"], r["seed"]): r for r in _read(args.out)}  # the fits' rows, read after this run's fits
    for name, variant, n in ensembles:
        folder = os.path.join(args.models_dir, variant)
        saved = sorted(int(d[4:]) for d in os.listdir(folder) if d.startswith("seed") and d[4:].isdigit()) \
            if os.path.isdir(folder) else []
        if not saved:
            raise UserError(f"--seed-ensemble {name}: no saved fits of variant {variant!r} under {folder}")
        for s in range(max(saved) // n + 1):
            seeds = list(range(n * s, n * s + n))
            if (name, s) in rows or not set(seeds) <= set(saved):
                continue
            members = [load(os.path.join(folder, f"seed{k}")) for k in seeds]
            kinds = {registered_kind(m) for m in members}
            if len(kinds) != 1:
                raise UserError(f"--seed-ensemble {name}: the saved fits of {variant!r} are of different kinds {kinds}")
            ens = EnsembleCostModel.from_fitted(members, train.batch, train.groups, seed=s)
            base = rows.get((variant, seeds[0]), {})
            _append(args, _row(name, "ensemble", {"members": ens.members, "of_variant": variant,
                                                  "member_params": base.get("params")}, s,
                               evaluate(ens, data, test_keys), test_keys, args.dataset,
                               fit_s=sum(rows.get((variant, k), {}).get("fit_s", float("nan")) for k in seeds),
                               member_seeds=seeds, train_programs=len(train)))


def markdown(rows: list[dict], pairs: list[tuple[str, str]] = ()) -> str:
    scored = sorted({n for r in rows for n in r.get("per_model_top1") or {}})
    lines = ["# Cost-model variants (exploratory; `experiments/costmodel/variants.py`)", "",
             f"Mean over the networks scored ({', '.join(scored) or 'none yet'}; since issue 47 the validation networks, "
             "`variants_validation.jsonl`, never the test networks; `variants.jsonl` keeps the rows scored on the test "
             "networks before, the record of how the earlier choices were made); mean ± sd over the seeds run. Fit seconds are "
             "from whatever else ran beside (see each line's `measured_on` in the JSONL); a variant counts only "
             "once registered and trained by `make train-costmodel`. Training programs: the size of the training split "
             "each row was fitted on (— for rows written before the column existed, 2026-12-07: fitted on the "
             "main set as of commit 2cf21ca or earlier); rows fitted on different sets do not compare.", "",
             "| name | kind | keywords | seeds | training programs | top-1 all | top-5 all | pairwise all | top-1 search "
             "| top-5 search | fit s |", "|---|---|---|---|---|---|---|---|---|---|---|"]
    names = list(dict.fromkeys(r["name"] for r in rows))
    for name in names:
        group = sorted((r for r in rows if r["name"] == name), key=lambda r: r["seed"])  # two processes interleave

        def cell(key, group=group):
            v = np.array([r[key] for r in group], float)
            return f"{v.mean():.3f}" + (f" ± {v.std(ddof=1):.3f}" if len(v) > 1 else "")

        seeds = ",".join(str(r["seed"]) for r in group)
        sizes = sorted({r.get("train_programs") for r in group}, key=lambda v: (v is None, v))
        sizes_cell = ", ".join("—" if v is None else f"{v:,}" for v in sizes)
        lines.append(f"| {name} | {group[0]['kind']} | `{json.dumps(group[0]['params'])}` | {seeds} | {sizes_cell} | "
                     + " | ".join(cell(k) for k in METRICS) + f" | {np.mean([r['fit_s'] for r in group]):.0f} |")
    return "\n".join(lines + paired_lines(rows, list(pairs)) + [""])


if __name__ == "__main__":
    raise SystemExit(main())
