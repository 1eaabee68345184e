"""Wait messages on the notification channel: what one connection and one access key may
register is capped (distinct (group, topic) pairs), so that a prefix grant cannot make a
key store waiters without bound — on topics that do not exist, for groups nobody uses. A
wait over a cap is refused with ``TooManyWaits`` and stores nothing; a wait sent again
(the channel's keepalive) costs no room."""

from __future__ import annotations

from pathlib import Path

import pytest
from cirrusmq_broker.errors import TooManyWaits
from cirrusmq_broker.rules.permissions import Permissions
from cirrusmq_broker.services.notifications import CONNECTION_TTL_S, ChannelService, WaitLimits
from cirrusmq_broker.settings import Settings
from cirrusmq_local.in_process import broker_settings


@pytest.fixture
def settings(aws: None) -> Settings:
    """The broker's settings with the notification channel's table."""
    return broker_settings(TEMPLATE, tables={"connections_table": "ConnectionsTable"})


TEMPLATE = Path(__file__).resolve().parents[2] / "template.yaml"
GRANT = Permissions.from_json({"subscribe": [{"groups": ["g*"], "topics": ["t*"]}]})


@pytest.fixture
def key(broker) -> str:
    access_key, _ = broker.access_keys.create(GRANT, "waits")
    return access_key.access_key


def channel(broker, clock) -> ChannelService:
    limits = WaitLimits(per_connection=3, per_key=5)
    return ChannelService(
        auth=broker.auth, connections=broker._connections, clock=clock, limits=limits
    )


def connected(broker, clock, key: str, *connection_ids: str) -> ChannelService:
    for connection_id in connection_ids:
        broker._connections.put_connection(
            connection_id, key, expires_at=clock() // 1000 + CONNECTION_TTL_S
        )
    return channel(broker, clock)


def stored(broker, clock, topic: str) -> list[str]:
    return [w.connection_id for w in broker._connections.waiters(topic, now_s=clock() // 1000)]


def wait(service: ChannelService, connection_id: str, group: str, *topics: str) -> dict:
    return service.wait(connection_id, {"action": "wait", "group": group, "topics": list(topics)})


def test_a_connection_waits_on_at_most_its_cap_of_group_topic_pairs(broker, clock, key) -> None:
    service = connected(broker, clock, key, "c1")
    assert wait(service, "c1", "g1", "t1", "t2", "t3")["type"] == "waiting"
    assert wait(service, "c1", "g1", "t3", "t2", "t1")["type"] == "waiting"  # sent again: free
    with pytest.raises(TooManyWaits):
        wait(service, "c1", "g1", "t4")
    with pytest.raises(TooManyWaits):
        wait(service, "c1", "g2", "t1")  # another group on a known topic: another pair
    assert stored(broker, clock, "t4") == []
    assert stored(broker, clock, "t1") == ["c1"]


def test_a_refused_wait_stores_none_of_its_topics(broker, clock, key) -> None:
    service = connected(broker, clock, key, "c1")
    wait(service, "c1", "g1", "t1", "t2")
    with pytest.raises(TooManyWaits):
        wait(service, "c1", "g1", "t3", "t4")
    assert stored(broker, clock, "t3") == [] and stored(broker, clock, "t4") == []


def test_a_key_waits_on_at_most_its_cap_across_its_connections(broker, clock, key) -> None:
    service = connected(broker, clock, key, "c1", "c2", "c3")
    wait(service, "c1", "g1", "t1", "t2", "t3")
    wait(service, "c2", "g1", "t1", "t2")
    with pytest.raises(TooManyWaits):
        wait(service, "c3", "g1", "t9")
    assert stored(broker, clock, "t9") == []


def test_a_keys_room_comes_back_once_its_connections_have_aged_out(broker, clock, key) -> None:
    """API Gateway closes every connection within 2 hours: what connections older than two
    connection lifetimes registered no longer counts."""
    service = connected(broker, clock, key, "c1", "c2")
    wait(service, "c1", "g1", "t1", "t2", "t3")
    wait(service, "c2", "g1", "t1", "t2")
    clock.advance(2 * CONNECTION_TTL_S + 1)
    service = connected(broker, clock, key, "c3")
    assert wait(service, "c3", "g1", "t7", "t8", "t9")["type"] == "waiting"


def test_two_waits_racing_on_one_connection_keep_its_cap(broker, clock, key, monkeypatch) -> None:
    """A wait on the same connection landing between a wait's read of the connection and
    its claim: the claim is conditional on the room it read, so the cap holds."""
    service = connected(broker, clock, key, "c1")
    wait(service, "c1", "g1", "t1")
    read = broker._connections.connection

    def read_then_race(connection_id: str):
        found = read(connection_id)
        monkeypatch.setattr(broker._connections, "connection", read)
        wait(service, "c1", "g1", "t2")
        return found

    monkeypatch.setattr(broker._connections, "connection", read_then_race)
    with pytest.raises(TooManyWaits):
        wait(service, "c1", "g1", "t3", "t4")
    assert stored(broker, clock, "t3") == [] and stored(broker, clock, "t2") == ["c1"]


def test_two_waits_racing_on_one_key_keep_its_cap(broker, clock, key, monkeypatch) -> None:
    """Another connection's wait landing between a wait's read of its key's count and its
    claim: the claim is conditional on the room it read, so the key's cap holds."""
    service = connected(broker, clock, key, "c1", "c2", "c3")
    wait(service, "c1", "g1", "t1", "t2", "t3")
    read = broker._connections.key_waits

    def read_then_race(*args, **kwargs):
        counts = read(*args, **kwargs)
        monkeypatch.setattr(broker._connections, "key_waits", read)
        wait(service, "c3", "g1", "t4", "t5")
        return counts

    monkeypatch.setattr(broker._connections, "key_waits", read_then_race)
    with pytest.raises(TooManyWaits):
        wait(service, "c2", "g1", "t6")
    assert stored(broker, clock, "t6") == [] and stored(broker, clock, "t5") == ["c3"]
