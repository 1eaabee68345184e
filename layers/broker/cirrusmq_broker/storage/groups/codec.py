"""GroupsTable items of a queue's summary and of its leases, and the write conditions
that make every write optimistic (on the version as read)."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from ...rules.group_state import GroupQueueState, Lease
from ..dynamo import to_item
from .keys import lease_stream, summary_stream

not_stored_yet = "attribute_not_exists(group_name)"
unchanged_since_read = "version = :version"
lease_unchanged = "lease_id = :id AND v = :v"
"""A lease as read: its id too, as versions restart at 1 in a new lease at the same slot
(after an offset reset)."""


def summary_values(state: GroupQueueState, *, version: int) -> dict[str, Any]:
    return {
        "group_name": state.group,
        "stream": summary_stream(state.topic, state.queue),
        "topic": state.topic,
        "queue": state.queue,
        "committed": state.committed,
        "cursor": state.cursor,
        "cursor_base": state.cursor_base,
        "earliest_deadline": state.earliest_deadline,
        "open_leases": state.open_leases,
        "version": version,
        "lock_owner": state.lock_owner,  # orderly consumption (FIFO topics)
        "lock_expiry": state.lock_expiry or None,
        "held": set(state.held) or None,  # FIFO: offsets waiting for their message group
    }


def state_of(v: dict[str, Any]) -> GroupQueueState:
    """The state a summary item holds (no lease loaded)."""
    state = GroupQueueState(
        group=v["group_name"],
        topic=v["topic"],
        queue=v["queue"],
        committed=v["committed"],
        cursor=v["cursor"],
        cursor_base=v["cursor_base"],
        earliest_deadline=v.get("earliest_deadline"),
        open_leases=v.get("open_leases", 0),
        version=v["version"],
        lock_owner=v.get("lock_owner"),
        lock_expiry=v.get("lock_expiry", 0),
        held=frozenset(v.get("held", ())),
    )
    state.stored = state.summary()
    state.stored_lock = (state.lock_owner, state.lock_expiry)
    return state


def lease_values(state: GroupQueueState, lease: Lease) -> dict[str, Any]:
    return {
        "group_name": state.group,
        "stream": lease_stream(state.topic, state.queue, lease.slot),
        "lease_id": lease.lease_id,
        "start": lease.start,
        "end": lease.end,
        "deadline": lease.deadline,
        "attempt": lease.attempt,
        "v": lease.version,
        "acked": set(lease.acked) or None,
        "moved": set(lease.moved) or None,
        "gone": set(lease.gone) or None,
        "groups": set(lease.groups) if lease.groups else None,  # FIFO: message groups held
    }


def lease_of(v: dict[str, Any]) -> Lease:
    """The lease a lease item holds."""
    return Lease(
        v["lease_id"],
        v["start"],
        v["end"],
        v["deadline"],
        v["attempt"],
        frozenset(v.get("moved", ())),
        frozenset(v.get("acked", ())),
        frozenset(v.get("gone", ())),
        v.get("v", 0),
        frozenset(v["groups"]) if v.get("groups") else None,
    )


def replace_version(lease: Lease, before: Lease | None) -> Lease:
    """``lease`` as it is stored once written over ``before`` (None: a new item)."""
    return replace(lease, version=(before.version if before else 0) + 1)


def as_read(lease: Lease) -> dict[str, Any]:
    """Values of ``lease_unchanged`` for ``lease`` as read."""
    return {":id": lease.lease_id, ":v": lease.version}


def summary_condition(state: GroupQueueState) -> dict[str, Any]:
    if state.version == 0:
        return {"ConditionExpression": not_stored_yet}
    return {
        "ConditionExpression": unchanged_since_read,
        "ExpressionAttributeValues": to_item({":version": state.version}),
    }


def lease_condition(before: Lease | None) -> dict[str, Any]:
    if before is None:
        return {"ConditionExpression": not_stored_yet}
    return {
        "ConditionExpression": lease_unchanged,
        "ExpressionAttributeValues": to_item(as_read(before)),
    }


def delete_request(
    table: str, key: dict[str, Any], condition: str, values: dict[str, Any]
) -> dict[str, Any]:
    """A transaction item deleting ``key`` if ``condition`` (on ``values``) holds."""
    return {
        "Delete": {
            "TableName": table,
            "Key": key,
            "ConditionExpression": condition,
            "ExpressionAttributeValues": to_item(values),
        }
    }
