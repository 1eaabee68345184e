"""Bodies of the group list and of a group's metrics over time."""

from __future__ import annotations

from pydantic import BaseModel, Field


class GroupSummaryBody(BaseModel):
    group: str
    topics: list[str] = Field(description="Topics the group has state or a subscription on.")


class GroupListBody(BaseModel):
    groups: list[GroupSummaryBody]


class TopicPointBody(BaseModel):
    timestamp: int = Field(description="Start of the minute, epoch ms.")
    lag: float | None = None
    oldest_unacked_age_seconds: float | None = None
    in_flight: float | None = None


class TopicMetricsBody(BaseModel):
    topic: str
    points: list[TopicPointBody] = Field(description="Minutes with a value, oldest first.")


class DeadLetterPointBody(BaseModel):
    timestamp: int
    dead_letters: float


class GroupMetricsBody(BaseModel):
    group: str
    start: int = Field(description="Epoch ms, included.")
    end: int = Field(description="Epoch ms, excluded.")
    period_seconds: int
    topics: list[TopicMetricsBody]
    dead_letters: list[DeadLetterPointBody] = Field(
        description="The group's dead letters per minute (empty unless the key is an admin)."
    )
    truncated: bool = Field(description="More topics than one answer holds (name `topic`).")
