"""Topic administration on in-process moto: the names a topic may take."""

from __future__ import annotations

import pytest
from cirrusmq_broker.errors import InvalidTopicName


def test_trailing_newline_is_not_a_valid_name(broker):
    with pytest.raises(InvalidTopicName):
        broker.admin.create_topic("x\n")
