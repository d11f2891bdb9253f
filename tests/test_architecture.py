"""The layering of the package, checked: the learning side (``autotune.data``, ``autotune.costmodel``)
never loads TVM, no module imports upward, no private name is imported across modules, and no
function in ``autotune/`` grows past 80 lines.

The import checks read the source with ``ast``, so an import inside a function (a lazy one) counts
as much as one at the top of a file. Fast: no TVM, no training.
"""

from __future__ import annotations

import ast
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PKG = ROOT / "autotune"

LEARNING_SIDE = ("autotune.data", "autotune.costmodel")
# what the learning side may never reach: TVM itself and every autotune module that loads it
TVM_SIDE = (
    "tvm", "tvm_ffi",
    "autotune.collection", "autotune.tuning", "autotune.tvmrt", "autotune.cuda", "autotune.frontend.relax",
    "autotune.tune", "autotune.api", "autotune.collect",
)
MAX_FUNCTION_LINES = 80
# Who may import whom: one row per unit of the package (a top-level module or a subpackage of autotune), read
# bottom-up. Every import between two units must be an arrow of this table (lazy imports included), and the
# table has no cycle: a new arrow is a design decision made here, not a side effect of an edit elsewhere.
ALLOWED: dict[str, set[str]] = {
    "errors": set(), "timing": set(), "hardware": set(), "paths": set(), "progress": set(),
    "cli": {"errors"}, "untrusted": {"errors"}, "lock": {"errors"}, "db": {"cli", "errors", "lock"},
    "data": {"cli", "errors"},
    "zoo": {"untrusted"},
    "costmodel": {"cli", "data", "errors", "hardware", "paths"},
    "tvmrt": {"db", "errors", "hardware"},
    "frontend": {"errors", "tvmrt", "zoo"},
    "env": {"cli", "hardware", "paths", "tvmrt"},
    "tuning": {"cli", "costmodel", "data", "errors", "frontend", "hardware", "paths", "progress", "timing", "tvmrt"},
    "collection": {"cli", "costmodel", "data", "errors", "frontend", "hardware", "progress", "tuning", "tvmrt", "zoo"},
    "cuda": {"cli", "collection", "data", "errors", "tvmrt"},
    "testing": {"costmodel", "data", "tuning", "tvmrt"},
    "calibrate": {"cli", "collection", "costmodel", "data", "errors", "hardware", "paths", "tuning", "tvmrt"},
    "tune": {"calibrate", "cli", "costmodel", "errors", "frontend", "lock", "tuning", "tvmrt"},
    "collect": {"cli", "collection", "costmodel", "data", "errors", "lock", "tuning", "tvmrt"},
    "api": {"frontend", "tune", "tuning", "tvmrt"},
}


def module_name(path: Path) -> str:
    rel = path.relative_to(ROOT).with_suffix("")
    parts = rel.parts[:-1] if rel.name == "__init__" else rel.parts
    return ".".join(parts)


def imported_modules(path: Path) -> list[tuple[int, str]]:
    """(line, dotted name) for every import anywhere in the file; ``from a import b`` yields both
    ``a`` and ``a.b`` (b may be a submodule); relative imports are resolved against the package."""
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    package = module_name(path).split(".")
    if path.name != "__init__.py":
        package = package[:-1]
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out += [(node.lineno, alias.name) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parent = package[: len(package) - (node.level - 1)]
                base = ".".join(parent + ([node.module] if node.module else []))
            out.append((node.lineno, base))
            out += [(node.lineno, f"{base}.{alias.name}") for alias in node.names]
    return out


def within(name: str, prefixes: tuple[str, ...]) -> bool:
    return any(name == p or name.startswith(p + ".") for p in prefixes)


def source_files(*packages: str) -> list[Path]:
    files = []
    for pkg in packages:
        files += sorted((ROOT / Path(*pkg.split("."))).rglob("*.py"))
    return files


def violations(files: list[Path], banned: tuple[str, ...]) -> list[str]:
    return [
        f"{f.relative_to(ROOT)}:{line} imports {name}"
        for f in files for line, name in imported_modules(f) if within(name, banned)
    ]


def test_learning_side_imports_without_tvm():
    """Every module of autotune.data and autotune.costmodel, imported in a clean interpreter."""
    code = (
        "import importlib, pkgutil, sys\n"
        "names = []\n"
        f"for pkg_name in {LEARNING_SIDE!r}:\n"
        "    pkg = importlib.import_module(pkg_name)\n"
        "    for info in pkgutil.walk_packages(pkg.__path__, pkg_name + '.'):\n"
        "        importlib.import_module(info.name)\n"
        "        names.append(info.name)\n"
        "print(len(names), ' '.join(names))\n"
        "print(' '.join(m for m in ('tvm', 'tvm_ffi') if m in sys.modules) or 'clean')\n"
    )
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    res = subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True, text=True,
                         timeout=300, check=False)
    assert res.returncode == 0, res.stderr[-3000:]
    count_and_names, loaded = res.stdout.strip().splitlines()[-2:]
    assert int(count_and_names.split()[0]) >= 10, f"too few modules walked: {count_and_names}"
    assert "autotune.costmodel.train" in count_and_names.split()  # the walk reached the CLIs too
    assert loaded == "clean", f"importing the learning side loaded {loaded}"


def unit_of(name: str) -> str | None:
    """The ALLOWED unit a dotted module name belongs to (None outside the package or for the package itself)."""
    parts = name.split(".")
    if parts[0] != "autotune" or len(parts) < 2:
        return None
    base = ROOT / "autotune" / parts[1]
    return parts[1] if base.with_suffix(".py").exists() or base.is_dir() else None


def arrows_outside_the_table(files: list[Path]) -> list[str]:
    out = []
    for f in files:
        src = unit_of(module_name(f))
        for line, name in imported_modules(f):
            dst = unit_of(name)
            if src and dst and dst != src and dst not in ALLOWED.get(src, set()):
                out.append(f"{f.relative_to(ROOT)}:{line} imports {name} ({src} -> {dst} is not in ALLOWED)")
    return out


def test_every_import_is_an_arrow_of_the_layer_table():
    units = {unit_of(module_name(f)) for f in PKG.rglob("*.py")} - {None}
    assert units == set(ALLOWED), f"units without a row: {sorted(units - set(ALLOWED))}; rows without a unit: " \
                                  f"{sorted(set(ALLOWED) - units)}"
    bad = arrows_outside_the_table(sorted(PKG.rglob("*.py")))
    assert not bad, "imports the layer table does not allow:\n" + "\n".join(bad)


def test_the_layer_table_has_no_cycle():
    state: dict[str, int] = {}

    def visit(u: str, path: list[str]) -> None:
        assert state.get(u) != 1, "cycle: " + " -> ".join([*path, u])
        if state.get(u) == 2:
            return
        state[u] = 1
        for v in ALLOWED[u]:
            visit(v, [*path, u])
        state[u] = 2

    for u in ALLOWED:
        visit(u, [])


def test_a_planted_upward_import_is_caught(tmp_path, monkeypatch):
    pkg = tmp_path / "autotune" / "data"
    pkg.mkdir(parents=True)
    (tmp_path / "autotune" / "tuning").mkdir()
    f = pkg / "upward.py"
    f.write_text("def f():\n    from autotune.tuning import session\n")
    monkeypatch.setattr(sys.modules[__name__], "ROOT", tmp_path)
    assert arrows_outside_the_table([f]) == [
        "autotune/data/upward.py:2 imports autotune.tuning (data -> tuning is not in ALLOWED)",
        "autotune/data/upward.py:2 imports autotune.tuning.session (data -> tuning is not in ALLOWED)"]


def test_learning_side_never_imports_the_tvm_side():
    """Not even lazily, inside a function: the learning side receives features, it never makes them."""
    bad = violations(source_files(*LEARNING_SIDE), TVM_SIDE)
    assert not bad, "the learning side reaches TVM:\n" + "\n".join(bad)


def test_the_package_never_imports_experiments_or_benchmarks():
    """experiments/ and benchmarks/ read the package; the package never reads them (a user's install has neither)."""
    bad = violations(sorted(PKG.rglob("*.py")), ("experiments", "benchmarks", "readings", "run", "real_budget",
                                                 "data_curve", "snapshots", "attribution", "_peers"))
    assert not bad, "the package imports an experiment or a benchmark:\n" + "\n".join(bad)


def test_data_does_not_import_costmodel():
    bad = violations(source_files("autotune.data"), ("autotune.costmodel",))
    assert not bad, "autotune.data imports upward:\n" + "\n".join(bad)


def test_import_checker_sees_lazy_and_relative_imports(tmp_path, monkeypatch):
    """The checkers themselves: a lazy ``import tvm``, a relative upward import and a private name
    imported from another module are found; a private module is not a private name."""
    pkg = tmp_path / "autotune" / "data"
    pkg.mkdir(parents=True)
    f = pkg / "leaky.py"
    f.write_text("def f():\n    import tvm.s_tir\n\n\ndef g():\n    from ..costmodel import xgb\n    from ..cli import run_main\n")
    monkeypatch.setattr(sys.modules[__name__], "ROOT", tmp_path)
    assert violations([f], TVM_SIDE) == ["autotune/data/leaky.py:2 imports tvm.s_tir"]
    assert violations([f], ("autotune.costmodel",)) == [
        "autotune/data/leaky.py:6 imports autotune.costmodel", "autotune/data/leaky.py:6 imports autotune.costmodel.xgb"
    ]
    (pkg / "_helpers.py").write_text("")
    g = pkg / "user.py"
    g.write_text("from . import _helpers\nfrom .leaky import _secret, public\n")
    assert private_imports([g]) == ["autotune/data/user.py:2 imports autotune.data.leaky._secret"]


def private_imports(files: list[Path]) -> list[str]:
    """``from autotune.x import _name`` where ``_name`` is not a module: a private name used across modules."""
    out = []
    for f in files:
        for line, name in imported_modules(f):
            parent, _, last = name.rpartition(".")
            if not (within(parent, ("autotune",)) and last.startswith("_") and not last.startswith("__")):
                continue
            as_module = ROOT / Path(*name.split("."))
            if not (as_module.with_suffix(".py").exists() or (as_module / "__init__.py").exists()):
                out.append(f"{f.relative_to(ROOT)}:{line} imports {name}")
    return out


def test_no_private_name_is_imported_across_modules():
    bad = private_imports(sorted(PKG.rglob("*.py")))
    assert not bad, "private names imported from another module (make them public or move them):\n" + "\n".join(bad)


def long_functions(files: list[Path]) -> list[str]:
    out = []
    for f in files:
        for node in ast.walk(ast.parse(f.read_text(encoding="utf-8"), filename=str(f))):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                n = node.end_lineno - node.lineno + 1
                if n > MAX_FUNCTION_LINES:
                    out.append(f"{f.relative_to(ROOT)}:{node.lineno} {node.name} is {n} lines")
    return out


def test_no_function_over_80_lines():
    bad = long_functions(sorted(PKG.rglob("*.py")))
    assert not bad, f"functions over {MAX_FUNCTION_LINES} lines (split them along a real seam):\n" + "\n".join(bad)


def test_ruff_bans_tvm_on_the_learning_side(tmp_path):
    """The lint rule (TID251 in pyproject.toml) flags ``import tvm`` in autotune/costmodel, not in tvmrt."""
    ruff = Path(sys.executable).parent / "ruff"
    if not ruff.exists():
        pytest.skip("ruff is not installed in this environment (pip install -e '.[dev]')")
    probe = "import tvm_ffi\n\n\ndef f():\n    from tvm.s_tir import meta_schedule\n\n    return meta_schedule, tvm_ffi\n"
    args = [str(ruff), "check", "--no-cache", "--select", "TID251", "--output-format", "concise",
            "--stdin-filename"]
    learning = subprocess.run(args + ["autotune/costmodel/_probe.py"], input=probe, cwd=ROOT,
                              capture_output=True, text=True, check=False)
    assert learning.returncode == 1 and learning.stdout.count("TID251") == 2, learning.stdout + learning.stderr
    tvm_side = subprocess.run(args + ["autotune/tvmrt/_probe.py"], input=probe, cwd=ROOT,
                              capture_output=True, text=True, check=False)
    assert tvm_side.returncode == 0, tvm_side.stdout + tvm_side.stderr
