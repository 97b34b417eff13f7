"""Settled is an event read from the instance (defs/automation.py's ``settling``), never a count of quiet seconds:
with a daemon beating and the automation sensor running, a deployment has settled only once the sensor evaluated
after the last run ended and requested nothing. The instance's records are written here as the daemon writes them
(Dagster's own types: this test fails when Dagster reshapes them)."""

from __future__ import annotations

import time

import dagster as dg
import pytest
from dagster._core.definitions.run_request import InstigatorType
from dagster._core.remote_origin import RegisteredCodeLocationOrigin, RemoteInstigatorOrigin, RemoteRepositoryOrigin
from dagster._core.scheduler.instigation import InstigatorState, InstigatorStatus, TickData, TickStatus
from dagster._daemon.types import DaemonHeartbeat

from eval_pipeline.defs.automation import SENSOR, settling
from eval_pipeline.defs.inflight import concerns_checkpoint


@dg.asset
def thing() -> None:
    return None


def _run(instance: dg.DagsterInstance, tags: dict[str, str] | None = None) -> float:
    """A run that ended; when it ended (the instance's clock)."""
    assert dg.materialize([thing], instance=instance, tags=tags or {}).success
    return instance.get_run_records(limit=1)[0].update_timestamp.timestamp()


def _beat(instance: dg.DagsterInstance, at: float) -> None:
    instance.add_daemon_heartbeat(DaemonHeartbeat(timestamp=at, daemon_type="ASSET", daemon_id="d"))


def _sensor(instance: dg.DagsterInstance, status: InstigatorStatus = InstigatorStatus.RUNNING) -> InstigatorState:
    origin = RemoteInstigatorOrigin(RemoteRepositoryOrigin(RegisteredCodeLocationOrigin("loc"), "repo"), SENSOR)
    state = InstigatorState(origin, InstigatorType.SENSOR, status)
    instance.add_instigator_state(state)
    return state


def _tick(instance: dg.DagsterInstance, state: InstigatorState, at: float, status: TickStatus, runs=()) -> None:
    instance.create_tick(
        TickData(
            instigator_origin_id=state.instigator_origin_id,
            instigator_name=SENSOR,
            instigator_type=InstigatorType.SENSOR,
            status=status,
            timestamp=at,
            end_timestamp=at + 0.0005,
            selector_id=state.selector_id,
            run_ids=list(runs),
        )
    )


def test_nothing_evaluates_the_automation_so_no_run_in_flight_is_settled():
    with dg.instance_for_test() as instance:
        assert settling(instance).settled  # no daemon at all: nothing is launched after the runs
        _run(instance)
        _beat(instance, time.time() - 600)  # a daemon that stopped long ago
        assert settling(instance).settled
        _beat(instance, time.time())
        _sensor(instance, InstigatorStatus.STOPPED)  # the sensor stopped in the UI
        assert settling(instance).settled


def test_a_running_sensor_must_have_evaluated_after_the_last_run_and_requested_nothing():
    with dg.instance_for_test() as instance:
        ended = _run(instance)
        _beat(instance, time.time())
        waiting = settling(instance)
        assert not waiting.settled and "has not evaluated yet" in (waiting.waiting or "")
        state = _sensor(instance)
        _tick(instance, state, ended - 5, TickStatus.SKIPPED)  # before the run ended: says nothing of it
        waiting = settling(instance)
        assert not waiting.settled and "since the last run ended" in (waiting.waiting or "")
        _tick(instance, state, ended + 0.001, TickStatus.SUCCESS, runs=["r1"])  # it asked for more
        assert not settling(instance).settled
        _tick(instance, state, ended + 0.002, TickStatus.SKIPPED)  # then nothing
        assert settling(instance).settled
        later = _run(instance)  # a new run ended after that tick: settled again only after the next evaluation
        assert not settling(instance).settled
        _tick(instance, state, later + 0.001, TickStatus.SKIPPED)
        assert settling(instance).settled


@pytest.mark.parametrize("status", [dg.DagsterRunStatus.STARTING, dg.DagsterRunStatus.STARTED])
def test_a_run_in_flight_is_not_settled_unless_it_concerns_another_checkpoint(status):
    with dg.instance_for_test() as instance:
        other = instance.add_run(dg.DagsterRun("j", run_id="a" * 36, status=status, tags={"eval/checkpoint": "x2"}))
        assert settling(instance, concerns_checkpoint("x1")).settled  # another checkpoint's run: x1 does not wait
        waiting = settling(instance)  # the deployment as a whole does
        assert not waiting.settled and other.run_id[:8] in (waiting.waiting or "")
        ranged = dg.DagsterRun("j", run_id="b" * 36, status=status, tags={"eval/checkpoints": "x0,x1"})
        instance.add_run(ranged)  # a range of checkpoints holding it
        assert not settling(instance, concerns_checkpoint("x1")).settled
        instance.delete_run(ranged.run_id)
        instance.add_run(dg.DagsterRun("j", run_id="c" * 36, status=status))  # the decisions: no checkpoint
        assert not settling(instance, concerns_checkpoint("x1")).settled
