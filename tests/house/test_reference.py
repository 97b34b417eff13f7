"""docs/rubric-reference.md is what the code says: every config field and every registered unit, written by
`eval-pipeline reference`; this fails when a field, a parameter or a unit changes and the file was not rewritten."""

from pathlib import Path

from eval_pipeline.cli import main as cli
from eval_pipeline.core.params import params_model
from eval_pipeline.metrics import METRICS
from eval_pipeline.publish.reference import reference

DOC = Path(__file__).resolve().parents[2] / "docs" / "rubric-reference.md"


def test_the_committed_reference_is_the_generated_one(tmp_path, capsys):
    assert DOC.read_text(encoding="utf-8") == reference(), "run `make reference` and commit docs/rubric-reference.md"
    out = tmp_path / "ref.md"
    assert cli(["reference", "--out", str(out)]) == 0 and out.read_text(encoding="utf-8") == reference()


def test_every_metric_and_its_parameters_are_in_it():
    text = DOC.read_text(encoding="utf-8")
    for name in METRICS:
        assert f"### `{name}`" in text
        for param in params_model(METRICS[name]).model_fields:
            assert f"| `{param}` |" in text


def test_the_committed_instance_is_the_typed_model_rendered(tmp_path):
    """deploy/dagster.yaml is InstanceConfig().render() (no regular expression edits it), and what `make dagster-home`
    writes for a warehouse is the same model with that warehouse's backfill limit, read back as Dagster reads it."""
    import yaml

    from eval_pipeline.runtime.instance import DEPLOY_YAML, InstanceConfig, instance_yaml

    assert DEPLOY_YAML.read_text() == InstanceConfig().render(), (
        "run `python -m eval_pipeline.runtime.instance --reference` and commit deploy/dagster.yaml"
    )
    file_limit = yaml.safe_load(instance_yaml(str(tmp_path / "w.duckdb")))
    assert file_limit == InstanceConfig(backfill_runs_at_once=1).data()
    assert file_limit["concurrency"]["runs"]["tag_concurrency_limits"] == [{"key": "dagster/backfill", "limit": 1}]
