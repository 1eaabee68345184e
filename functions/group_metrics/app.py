"""GroupMetricsFunction (scheduled, once a minute): emits every consumer group's lag, age of
its oldest unacked message and messages in flight per topic, and its dead letters, as EMF
metrics (services/group_metrics.py states the AWS calls per group)."""

from dataclasses import asdict

from cirrusmq_broker.container import current_broker
from cirrusmq_broker.telemetry import MetricUnit, emit_metrics, logger, scheduled


@scheduled("GroupMetrics")
def lambda_handler(event: dict, context: object) -> dict:
    groups = current_broker().group_metrics.collect()
    for group in groups:
        for topic in group.topics:
            values = {
                "Lag": (MetricUnit.Count, topic.lag),
                "InFlight": (MetricUnit.Count, topic.in_flight),
            }
            if topic.oldest_unacked_age_s is not None:
                values["OldestUnackedAge"] = (MetricUnit.Seconds, topic.oldest_unacked_age_s)
            emit_metrics(values, [{"Group": group.group, "Topic": topic.topic}, {}])
        emit_metrics(
            {"DeadLetters": (MetricUnit.Count, group.dead_letters)},
            [{"Group": group.group}, {}],
        )
        logger.debug("group metrics", extra=asdict(group))
    return {"groups": len(groups), "topics": sum(len(g.topics) for g in groups)}
