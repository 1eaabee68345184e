"""The cost benchmark prices each profile from a stack deployed as that profile is: the
steady profile's LeasesOnSummary=on is measured, not assumed."""

from __future__ import annotations

from core_queue import PROFILES, DoorRun, deployed_settings, priced_on, run_of

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
