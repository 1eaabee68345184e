"""The cost benchmark's Lambda duration model: CPU at the MemorySize's share, waits as
measured here or, on paper for AWS, at each call's published latency."""

from __future__ import annotations

import pytest
from core_queue import Invocation, Usage


def test_cpu_time_is_stretched_by_the_cpu_share_and_waits_are_kept() -> None:
    run = Invocation(wall_s=0.050, cpu_s=0.020, memory_mb=1024)
    # 30 ms waiting + 20 ms x 1769 / 1024 = 64.55 -> 65 ms at 1 GB
    assert run.billed_gb_s() == pytest.approx(0.065)
    # 512 MB: the waits cost half, the CPU time the same GB-s (3.46x as long at half the GB)
    assert run.billed_gb_s(512) == pytest.approx(0.050)
    # from 1,769 MB on, a full vCPU: no stretch
    assert Invocation(0.050, 0.020, 3008).billed_gb_s() == pytest.approx(0.050 * 3008 / 1024)


def test_a_function_with_its_own_memory_keeps_it_under_a_profile() -> None:
    notify = Invocation(0.010, 0.0, 256, streamed=True)
    assert notify.billed_gb_s(512) == notify.billed_gb_s() == pytest.approx(0.010 / 4)


def test_on_paper_waits_replace_the_measured_ones() -> None:
    calls = (("DynamoDB write", 3), ("S3 PUT", 1), ("S3 other", 1), ("kms Decrypt", 1))
    run = Invocation(wall_s=0.5, cpu_s=0.0, memory_mb=1024, calls=calls)
    # low: 3 x 1 + 10 + 10 + 1 ms; high: 3 x 10 + 100 + 100 + 10 ms
    assert run.aws_gb_s(None, 0) == pytest.approx(0.024)
    assert run.aws_gb_s(None, 1) == pytest.approx(0.240)
    # S3 Express: single-digit ms for every S3 call
    assert run.aws_gb_s(None, 1, s3_express=True) == pytest.approx(0.060)


def test_usage_sums_its_invocations() -> None:
    usage = Usage(invocations=[Invocation(0.010, 0.0, 1024), Invocation(0.020, 0.0, 1024)])
    assert usage.billed_gb_s() == pytest.approx(0.030)
    assert usage.handler_ms == pytest.approx([10.0, 20.0])


def test_a_stream_fed_run_is_no_front_door_request() -> None:
    usage = Usage(
        requests=2,
        invocations=[Invocation(0.01, 0.0, 1024), Invocation(0.01, 0.0, 256, streamed=True)],
    )
    cost = usage.cost(front_door="http-api")
    assert cost["HTTP API"] == pytest.approx(1 / 1_000_000)
    assert cost["Lambda req"] == pytest.approx(2 * 0.20 / 1_000_000)
