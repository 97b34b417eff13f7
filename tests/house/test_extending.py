"""docs/extending.md: a judge backend and a warehouse backend are one module each. The modules the page shows are
loaded as they are written there, and work: the judge scores through the runner and is recorded as who judged; the
warehouse keeps the contract every backend keeps (tests/storage/test_warehouse.py)."""

from __future__ import annotations

import importlib.util
import re
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from eval_pipeline.judge.backends import BACKENDS as JUDGE_BACKENDS
from eval_pipeline.judge.backends import identity_of
from eval_pipeline.judge.runner import judge_samples
from eval_pipeline.rubrics import load_rubric
from eval_pipeline.storage.registry import BACKENDS as WAREHOUSE_BACKENDS
from eval_pipeline.storage.warehouse import Warehouse
from tests.conftest import RUBRIC_DIR
from tests.helpers.judges import judge_named
from tests.storage import test_warehouse

PAGE = Path(__file__).resolve().parents[2] / "docs" / "extending.md"


def module_on_the_page(path: str, registry, name: str, tmp_path: Path) -> Iterator[None]:
    """The page's python block that starts with ``# <path>``, imported as that module (its registration runs); the
    registration is taken back afterwards."""
    blocks = re.findall(r"```python\n(.*?)```", PAGE.read_text(), flags=re.S)
    found = [b for b in blocks if b.startswith(f"# {path}\n")]
    assert len(found) == 1, f"docs/extending.md has no single block for {path}"
    file = tmp_path / Path(path).name
    file.write_text(found[0])
    module = path.removesuffix(".py").replace("/", ".")
    spec = importlib.util.spec_from_file_location(module, file)
    assert spec is not None and spec.loader is not None
    registry.load()  # the package's own modules first, as in a run
    loaded = importlib.util.module_from_spec(spec)
    sys.modules[module] = loaded
    try:
        spec.loader.exec_module(loaded)
        assert name in registry
        yield
    finally:
        registry._units.pop(name, None)
        sys.modules.pop(module, None)


@pytest.fixture
def midpoint(tmp_path):
    yield from module_on_the_page("eval_pipeline/judge/backends/midpoint.py", JUDGE_BACKENDS, "midpoint", tmp_path)


@pytest.fixture
def named(tmp_path, monkeypatch):
    monkeypatch.setenv("EVAL_NAMED_WAREHOUSES", str(tmp_path / "named"))
    yield from module_on_the_page("eval_pipeline/storage/backends/named.py", WAREHOUSE_BACKENDS, "named", tmp_path)


def test_the_judge_backend_of_the_page_judges_and_is_recorded(midpoint, warehouse_path):
    rubric = load_rubric(RUBRIC_DIR / "empathetic_dialogue.yaml")
    records = [dict(sample_id=f"s{i}", topic="t", user_statement="hi", response="hello") for i in range(3)]
    df, stats = judge_samples(rubric, "c", records, Warehouse(warehouse_path), judge_named("midpoint"))
    panel = df[df.judge == "panel"]
    mids = {d.key: (rubric.scale_of(d).min + rubric.scale_of(d).max) / 2 for d in rubric.judged_dimensions}
    assert len(panel) == 3 * len(mids) and (panel.score == panel.dimension.map(mids)).all()
    assert stats.judges == ["midpoint"]
    assert identity_of(rubric, judge_named("midpoint")).backend == "midpoint"


@pytest.mark.parametrize(
    "contract",
    [
        test_warehouse.test_replace_partition_is_idempotent_and_inserts_by_name,
        test_warehouse.test_failed_insert_rolls_back_the_delete,
        test_warehouse.test_rows_must_belong_to_the_partition,
        test_warehouse.test_new_columns_are_added_on_schema_evolution,
    ],
)
def test_the_warehouse_backend_of_the_page_keeps_the_contract(named, tmp_path, contract):
    contract("named:demo")
    wh = Warehouse("named:demo")
    assert wh.path == str(tmp_path / "named" / "demo.duckdb")  # where the page says it keeps it
    assert wh.backend.concurrent_writers is False  # a file: one writer at a time


def test_a_bad_name_is_refused_in_one_line(named):
    from eval_pipeline.storage.backend import BackendError

    with pytest.raises(BackendError, match="a name is letters, digits and underscores"):
        Warehouse("named:../elsewhere")
