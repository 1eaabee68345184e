"""The cost benchmark prices each profile from a stack deployed as that profile is: the
steady profile's LeasesOnSummary=on is measured, not assumed."""

from __future__ import annotations

from collections import Counter

import pytest
from core_queue import (
    PROFILES,
    BatchRun,
    DoorRun,
    IdleCosts,
    Phase,
    Usage,
    deployed_settings,
    priced_on,
    run_of,
    summary,
)

DEFAULT, STEADY = PROFILES["default"], PROFILES["steady"]


def stack(front_door: str, setting: str) -> DoorRun:
    return DoorRun(front_door, [], 1024, "bucket", (0, 0, 0), setting)


def test_each_profile_names_the_leases_on_summary_it_is_deployed_with() -> None:
    assert (DEFAULT.leases_on_summary, STEADY.leases_on_summary) == ("off", "on")
    assert "LeasesOnSummary=on" in STEADY.parameters


def test_by_default_one_stack_per_setting_the_profiles_name() -> None:
    assert deployed_settings([DEFAULT, STEADY], "profile") == ["off", "on"]
    assert deployed_settings([STEADY], "profile") == ["on"]
    assert deployed_settings([DEFAULT, STEADY], "off") == ["off"]


def test_a_profile_is_priced_from_the_stack_deployed_as_it_is() -> None:
    stacks = [stack(door, s) for door in ("http-api", "function-url") for s in ("off", "on")]
    assert run_of(stacks, "function-url", STEADY, "profile") is stacks[3]
    assert run_of(stacks, "function-url", DEFAULT, "profile") is stacks[2]
    assert run_of(stacks, "http-api", STEADY, "profile") is stacks[1]
    assert priced_on(stacks[1], [DEFAULT, STEADY], "profile") == [STEADY]
    assert priced_on(stacks[0], [DEFAULT, STEADY], "profile") == [DEFAULT]


def test_one_setting_named_prices_every_profile_from_its_stack() -> None:
    stacks = [stack("function-url", "on")]
    assert priced_on(stacks[0], [DEFAULT, STEADY], "on") == [DEFAULT, STEADY]
    assert run_of(stacks, "function-url", DEFAULT, "on") is stacks[0]


def counted(write_units: int) -> list[BatchRun]:
    """A stack's round of batch 100 whose only calls are ``write_units`` GroupsTable WRU."""
    usage = Usage(write_units=Counter({"GroupsTable": write_units}))
    produce = Phase(1000, 1.0, [0.01], {"produce": usage})
    return [BatchRun(100, produce, Phase(1000, 1.0, [0.01], {}), 1.0, 1.0)]


def test_the_report_data_prices_each_profile_from_its_own_stack() -> None:
    stacks = [
        DoorRun("function-url", counted(1000), 1024, "bucket", (0, 0, 0), "off"),
        DoorRun("function-url", counted(4000), 1024, "bucket", (0, 0, 0), "on"),
    ]
    idle = IdleCosts(Usage(), 20.0, Usage(), 1, 10.0, 10.0)
    data = summary(stacks, [DEFAULT, STEADY], 1024, idle, leases_on_summary="profile")
    priced = data["batches"][0]["profiles"]
    assert priced["default"]["components"]["DDB write"] == pytest.approx(0.625)  # 1 WRU/msg
    assert priced["steady"]["components"]["DDB write"] == pytest.approx(
        4 * 0.00065 / 3600 / 0.70 * 1e6  # 4 WRU/msg at the provisioned rate
    )
    assert data["profiles"]["steady"].endswith("(measured with LeasesOnSummary=on)")
    assert data["profiles"]["default"].endswith("(measured with LeasesOnSummary=off)")
