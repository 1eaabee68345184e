"""Large messages in Spark: the pointer columns, ``largeBodies=read``, and a native Parquet
read of ``topics/`` that never meets a body object."""

from __future__ import annotations

import hashlib
import os

import pytest
from cirrusmq import Message
from pyspark.errors import PySparkException
from spark_helpers import load, mirror

MIB = 1024 * 1024


def test_the_pointer_columns_and_reading_the_bodies(
    spark, cirrusmq_stack, admin, producer, topic_name, tmp_path
):
    admin.create_topic(topic_name, queues=1)
    big = os.urandom(5 * MIB)
    big_id = producer.send(Message(topic_name, big)).message_id
    small_id = producer.send(Message(topic_name, b"small")).message_id

    rows = {r.message_id: r for r in load(spark, cirrusmq_stack, topic_name).collect()}
    pointer, inline = rows[big_id], rows[small_id]
    assert pointer.body_key.startswith(f"topics/topic={topic_name}/_bodies/")
    assert pointer.body_bucket == cirrusmq_stack.resources["MessageBucket"]
    assert pointer.body_size == len(big)
    assert pointer.body_sha256 == hashlib.sha256(big).hexdigest()
    assert pointer.body.startswith(b'["software.amazon.payloadoffloading.PayloadS3Pointer"')
    assert (inline.body, inline.body_key, inline.body_size) == (b"small", None, None)

    read = load(spark, cirrusmq_stack, topic_name, largeBodies="read")
    bodies = {r.message_id: r.body for r in read.select("message_id", "body").collect()}
    assert bodies == {big_id: big, small_id: b"small"}

    mirror(cirrusmq_stack, f"topics/topic={topic_name}/", tmp_path)
    assert list((tmp_path / "topics" / f"topic={topic_name}" / "_bodies").rglob("*"))
    native = spark.read.parquet(str(tmp_path / "topics")).where(f"topic = '{topic_name}'")
    assert sorted(r.message_id for r in native.collect()) == sorted([big_id, small_id])


def test_an_unknown_large_bodies_option_is_refused(spark, cirrusmq_stack, admin, topic_name):
    admin.create_topic(topic_name, queues=1)
    with pytest.raises(PySparkException, match="largeBodies"):
        load(spark, cirrusmq_stack, topic_name, largeBodies="maybe").collect()
