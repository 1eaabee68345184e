"""GroupsTable items of a queue's summary and of its leases, and the write conditions
that make every write optimistic (on the version as read).

A lease is stored in an item of its own or, inline (:func:`is_inline`), on its queue's
summary under the same attribute names with ``INLINE_PREFIX``: :class:`LeasePlace` says
where, and every conditional write of a lease is built from it. The summary is written by
an update of the attributes a save changed: the lease on it only when the save changed it,
conditional on it as read (:func:`inline_condition`), so an ack or a move of that lease,
which leaves the summary's version alone, does not refuse a save that did not touch it."""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

from ...rules.group_state import GroupQueueState, Lease, LeaseSlot, is_inline
from ..dynamo import to_item
from .keys import item_key, lease_stream, summary_stream

not_stored_yet = "attribute_not_exists(group_name)"
unchanged_since_read = "version = :version"
lease_unchanged = "{p}lease_id = :id AND {p}v = :v"
"""A lease as read: its id too, as versions restart at 1 in a new lease at the same slot
(after an offset reset). Conditions on a lease are written with ``{p}`` before its
attribute names (:meth:`LeasePlace.condition`)."""

INLINE_PREFIX = "l_"
"""What the attribute names of the lease stored on a summary start with."""
LEASE_FIELDS = (
    "lease_id", "start", "end", "deadline", "attempt", "v", "acked", "moved", "gone", "groups",
)  # fmt: skip
INLINE_FIELDS = ", ".join(INLINE_PREFIX + name for name in LEASE_FIELDS)


@dataclass(frozen=True)
class LeasePlace:
    """Where a lease is stored: its own item, or (``inline``) its queue's summary."""

    key: dict[str, Any]
    """The item's key (DynamoDB-typed)."""
    inline: bool

    @staticmethod
    def of(group: str, topic: str, queue: int, lease_id: str, slot: LeaseSlot) -> LeasePlace:
        inline = is_inline(lease_id)
        stream = summary_stream(topic, queue) if inline else lease_stream(topic, queue, slot)
        return LeasePlace(to_item(item_key(group, stream)), inline)

    def name(self, field: str) -> str:
        """The attribute name of the lease's ``field`` here."""
        return INLINE_PREFIX + field if self.inline else field

    def condition(self, template: str) -> str:
        """A condition on the lease here, from ``template`` (``{p}`` before each of the
        lease's attribute names)."""
        return template.format(p=INLINE_PREFIX if self.inline else "")

    def request(
        self, table: str, condition: str, values: dict[str, Any], names: dict[str, str] | None
    ) -> dict[str, Any]:
        """A transaction item removing the lease if ``condition`` (a template for
        :meth:`condition`; ``names``: its placeholders → a lease item's names) holds: a
        delete of its item, or the removal of its attributes from the summary, which
        counts one open lease less."""
        body: dict[str, Any] = {
            "TableName": table,
            "Key": self.key,
            "ConditionExpression": self.condition(condition),
            "ExpressionAttributeValues": to_item(values),
        }
        if names:
            body["ExpressionAttributeNames"] = {k: self.name(v) for k, v in names.items()}
        if not self.inline:
            return {"Delete": body}
        return {"Update": removal(body)}


def removal(body: dict[str, Any]) -> dict[str, Any]:
    """``body`` (an update of a summary) removing the lease stored on it: its attributes
    go, and the summary's open-lease count down by one (it stays an upper bound)."""
    return body | {
        "UpdateExpression": f"REMOVE {INLINE_FIELDS} ADD open_leases :less",
        "ExpressionAttributeValues": body.get("ExpressionAttributeValues", {})
        | to_item({":less": -1}),
    }


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


def inline_values(lease: Lease | None) -> dict[str, Any]:
    """The summary's attributes of the lease stored on it (None: no lease there)."""
    if lease is None:
        return {}
    return {INLINE_PREFIX + name: value for name, value in lease_fields(lease).items()}


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
    if INLINE_PREFIX + "lease_id" in v:
        inline = lease_of(v, INLINE_PREFIX)
        state.leases[inline.lease_id] = inline
        state.stored_inline = inline
    # the open-lease count is an upper bound: none, or only the summary's, is all of them
    state.complete = state.open_leases <= len(state.leases)
    return state


def lease_values(state: GroupQueueState, lease: Lease) -> dict[str, Any]:
    return {
        "group_name": state.group,
        "stream": lease_stream(state.topic, state.queue, lease.slot),
        **lease_fields(lease),
    }


def lease_fields(lease: Lease) -> dict[str, Any]:
    """A lease's attributes but the key."""
    return {
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


def lease_of(v: dict[str, Any], prefix: str = "") -> Lease:
    """The lease a lease item holds (``prefix``: INLINE_PREFIX, the one a summary holds)."""
    groups = v.get(prefix + "groups")
    return Lease(
        v[prefix + "lease_id"],
        v[prefix + "start"],
        v[prefix + "end"],
        v[prefix + "deadline"],
        v[prefix + "attempt"],
        frozenset(v.get(prefix + "moved", ())),
        frozenset(v.get(prefix + "acked", ())),
        frozenset(v.get(prefix + "gone", ())),
        v.get(prefix + "v", 0),
        frozenset(groups) if groups else None,
    )


def replace_version(lease: Lease, before: Lease | None) -> Lease:
    """``lease`` as it is stored once written over ``before`` (None: a new item)."""
    return replace(lease, version=(before.version if before else 0) + 1)


def as_read(lease: Lease) -> dict[str, Any]:
    """Values of ``lease_unchanged`` for ``lease`` as read."""
    return {":id": lease.lease_id, ":v": lease.version}


def summary_update(state: GroupQueueState, inline: Lease | None) -> dict[str, Any]:
    """The update (key, expression, condition) writing ``state``'s summary with the next
    version, if nobody saved it since it was read, and the lease stored on it when the
    save changed that (``inline``: the lease to store there, None: none)."""
    values = summary_values(state, version=state.version + 1)
    key = {name: values.pop(name) for name in ("group_name", "stream")}
    condition = summary_condition(state)
    expression = condition.get("ConditionExpression", "")
    placeholders = dict(condition.get("ExpressionAttributeValues", {}))
    if inline != state.stored_inline:
        values |= dict.fromkeys(INLINE_PREFIX + name for name in LEASE_FIELDS)
        values |= inline_values(inline)
        held, held_values = inline_condition(state.stored_inline)
        expression = " AND ".join(f"({part})" for part in (expression, held) if part)
        placeholders |= to_item(held_values)
    names = {f"#a{n}": name for n, name in enumerate(values)}
    by_name = {name: alias for alias, name in names.items()}
    kept = [name for name, value in values.items() if value is not None]
    dropped = [by_name[name] for name, value in values.items() if value is None]
    update = "SET " + ", ".join(f"{by_name[name]} = :a{by_name[name][2:]}" for name in kept)
    placeholders |= to_item({f":a{by_name[name][2:]}": values[name] for name in kept})
    body = {
        "Key": to_item(key),
        "UpdateExpression": update + (f" REMOVE {', '.join(dropped)}" if dropped else ""),
        "ExpressionAttributeNames": names,
        "ExpressionAttributeValues": placeholders,
    }
    return body | ({"ConditionExpression": expression} if expression else {})


def inline_condition(stored: Lease | None) -> tuple[str, dict[str, Any]]:
    """The condition that the lease stored on a summary is still ``stored`` (as read;
    None: that none is), and its values."""
    if stored is None:
        return f"attribute_not_exists({INLINE_PREFIX}lease_id)", {}
    return lease_unchanged.format(p=INLINE_PREFIX), as_read(stored)


def summary_condition(state: GroupQueueState) -> dict[str, Any]:
    if state.version == 0:
        return {"ConditionExpression": not_stored_yet}
    return {
        "ConditionExpression": unchanged_since_read,
        "ExpressionAttributeValues": to_item({":version": state.version}),
    }


def lease_condition(before: Lease | None) -> dict[str, Any]:
    """The condition of a write of a lease item over ``before`` (None: a new one)."""
    if before is None:
        return {"ConditionExpression": not_stored_yet}
    return {
        "ConditionExpression": lease_unchanged.format(p=""),
        "ExpressionAttributeValues": to_item(as_read(before)),
    }
