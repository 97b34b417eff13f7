"""The house's import contract: layers import only downward, and no module imports itself back through others.

Layers, bottom first (a module may import its own layer and any below it; ``TYPE_CHECKING`` imports count too,
since they are how a layer learns names from another):

    core, devtools, provision -> storage -> ingest, metrics, agreement -> judge -> scoring -> rubrics
    -> publish -> defs -> runtime -> entry points (cli, console, demo)

``devtools`` (the local OpenAI-protocol server for tests) and ``provision`` (data files from packages) stand on the
ground floor beside ``core``. ``defs`` only builds definitions; ``runtime`` operates Dagster (the instance, its event
log, the daemon, the Celery launcher and app, the one module that reaches past Dagster's public API) and runs the
graph (runner, runs).
The test reads the source, so it fails on the commit that adds a cycle or an upward import.
"""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[2] / "eval_pipeline"
LAYERS = [
    {"core", "devtools", "provision"},
    {"storage"},
    {"ingest", "metrics", "agreement"},
    {"judge"},
    {"scoring"},
    {"rubrics"},
    {"publish"},
    {"defs"},
    {"runtime"},
    {"console", "cli", "demo", "__init__", "command"},
]
LAYER_OF = {name: i for i, names in enumerate(LAYERS) for name in names}


def _module_of(path: Path) -> str:
    rel = path.relative_to(PACKAGE.parent).with_suffix("")
    parts = list(rel.parts)
    if parts[-1] == "__init__":
        parts = parts[:-1]
    return ".".join(parts)


def _imports(path: Path, module: str) -> set[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    found = set()
    package = module if path.name == "__init__.py" else module.rsplit(".", 1)[0]
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found |= {a.name for a in node.names if a.name.startswith("eval_pipeline")}
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[: len(package.split(".")) - node.level + 1]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            if target.startswith("eval_pipeline"):
                found.add(target)
                found |= {f"{target}.{a.name}" for a in node.names}
    return found


def _graph() -> dict[str, set[str]]:
    files = {_module_of(p): p for p in PACKAGE.rglob("*.py")}
    graph = {}
    for module, path in files.items():
        graph[module] = {t for t in _imports(path, module) if t in files and t != module}
    return graph


def _layer(module: str) -> int:
    top = module.split(".")[1] if "." in module else "__init__"
    return LAYER_OF[top]


def test_every_top_level_part_of_the_package_has_a_layer():
    tops = {p.stem if p.is_file() else p.name for p in PACKAGE.iterdir() if p.suffix == ".py" or p.is_dir()}
    tops -= {"__pycache__", "package_data"}
    assert tops <= set(LAYER_OF), sorted(tops - set(LAYER_OF))


def test_no_import_runs_back_up_a_layer():
    upward = [
        f"{m} (layer {_layer(m)}) imports {t} (layer {_layer(t)})"
        for m, targets in _graph().items()
        for t in targets
        if _layer(t) > _layer(m) and not (m.startswith("eval_pipeline.devtools") and _layer(t) == 0)
    ]
    assert upward == [], "\n".join(sorted(upward))


def test_no_cycle_between_modules():
    graph = _graph()
    state: dict[str, int] = {}
    cycles: list[list[str]] = []

    def visit(node: str, stack: list[str]) -> None:
        state[node] = 1
        for nxt in sorted(graph[node]):
            if state.get(nxt) == 1:
                cycles.append(stack[stack.index(nxt) :] + [nxt])
            elif nxt not in state:
                visit(nxt, stack + [nxt])
        state[node] = 2

    for node in sorted(graph):
        if node not in state:
            visit(node, [node])
    assert cycles == [], "\n".join(" -> ".join(c) for c in cycles)


# The way a judge setting goes, top first (docs/extending.md): each module passes the settings down, never back up,
# so each imports only modules after it here. The settings themselves are data below the judge (core.settings.
# JudgeConfig, one judge's made by ``for_judge``).
JUDGE_WAY = [
    "backends.openai",
    "llm_rows",
    "cached",
    "calls",
    "workers",
    "client",
    "cache",
    "transport",
    "costs",
    "reply",
    "redact",
]


def test_a_judge_setting_goes_one_way_down_the_judge_modules():
    graph = _graph()
    way = [f"eval_pipeline.judge.{m}" for m in JUDGE_WAY]
    back = [
        f"{m} imports {t}, which comes before it on the way"
        for i, m in enumerate(way)
        for t in graph[m]
        if t in way[:i]
    ]
    assert back == [], "\n".join(back)
    assert all(m in graph for m in way), [m for m in way if m not in graph]  # the way names modules that exist


def test_the_calibration_pool_reads_the_sampling_design_from_the_estimator_library():
    """#72.7: the pool asset took the active queue's plan and inclusion probabilities from the annotate app's
    queues (publish/); the item lists are the estimator library's (agreement/plan.py, its design's mathematics in
    agreement/design.py), and the pool imports nothing of publish/."""
    tree = ast.parse((PACKAGE / "defs" / "assets" / "pools.py").read_text())
    imported = [n.module or "" for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)]
    imported += [a.name for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names]
    assert "eval_pipeline.agreement.plan" in imported
    assert not [m for m in imported if m.startswith("eval_pipeline.publish")], imported


def test_no_module_imports_another_modules_private_names():
    """#76: a name that starts with ``_`` is its module's own; another module that needs it gets a public name (25
    such imports of 14 names were mended: the CLI's shared helpers, the heuristic judge's text helpers, the judge's
    row builders, the schema's absent-value test, the stub's answer helpers)."""
    found = []
    for path in PACKAGE.rglob("*.py"):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("eval_pipeline"):
                found += [
                    f"{path.relative_to(PACKAGE)} imports {node.module}.{a.name}"
                    for a in node.names
                    if a.name.startswith("_") and not a.name.startswith("__")
                ]
    assert found == [], "\n".join(found)
