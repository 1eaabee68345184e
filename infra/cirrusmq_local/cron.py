"""EventBridge ``cron(minutes hours day-of-month month day-of-week year)`` expressions (UTC).

Supported: ``*``, ``?``, values, ranges ``a-b``, lists ``a,b``, steps ``*/n`` and ``a-b/n``,
month names (JAN-DEC) and weekday names (SUN-SAT, 1 = Sunday). Not supported locally:
``L``, ``W`` and ``#``.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

__all__ = ["CronExpression", "CronError"]

_MONTH_NAMES = ("JAN", "FEB", "MAR", "APR", "MAY", "JUN", "JUL", "AUG", "SEP", "OCT", "NOV", "DEC")
_MONTHS = {name: number for number, name in enumerate(_MONTH_NAMES, 1)}
_DAYS = {
    name: number for number, name in enumerate(("SUN", "MON", "TUE", "WED", "THU", "FRI", "SAT"), 1)
}
_LIMIT_YEARS = 10


class CronError(ValueError):
    """The cron expression is malformed or uses a feature the local stack lacks."""


def _parse_value(text: str, names: dict[str, int], low: int, high: int) -> int:
    value = names.get(text.upper()) if not text.isdigit() else int(text)
    if value is None and any(mark in text.upper() for mark in "LW#"):
        raise CronError(f"{text!r}: L, W and # are not supported by the local stack")
    if value is None or not low <= value <= high:
        raise CronError(f"{text!r} is not in {low}-{high}")
    return value


def _parse_field(
    text: str, low: int, high: int, names: dict[str, int] | None = None
) -> frozenset[int]:
    names = names or {}
    values: set[int] = set()
    for part in text.split(","):
        base, _, step_text = part.partition("/")
        step = int(step_text) if step_text else 1
        if step < 1:
            raise CronError(f"{part!r}: step must be positive")
        if base in ("*", "?"):
            start, end = low, high
        elif "-" in base:
            first, last = base.split("-", 1)
            start, end = _parse_value(first, names, low, high), _parse_value(last, names, low, high)
        else:
            start = _parse_value(base, names, low, high)
            end = high if step_text else start
        if start > end:
            raise CronError(f"{part!r}: range runs backwards")
        values.update(range(start, end + 1, step))
    return frozenset(values)


@dataclass(frozen=True)
class CronExpression:
    """A parsed cron expression; :meth:`next_after` gives the next firing time."""

    minutes: frozenset[int]
    hours: frozenset[int]
    days_of_month: frozenset[int] | None  # None: "?"
    months: frozenset[int]
    days_of_week: frozenset[int] | None  # None: "?"; 1 = Sunday
    years: frozenset[int]

    @classmethod
    def parse(cls, body: str) -> CronExpression:
        """Parse the part between ``cron(`` and ``)``."""
        fields = body.split()
        if len(fields) != 6:
            raise CronError(f"cron({body}) needs 6 fields: minutes hours day month weekday year")
        minute, hour, dom, month, dow, year = fields
        if (dom == "?") == (dow == "?"):
            raise CronError(f"cron({body}): exactly one of day-of-month and day-of-week must be ?")
        return cls(
            minutes=_parse_field(minute, 0, 59),
            hours=_parse_field(hour, 0, 23),
            days_of_month=None if dom == "?" else _parse_field(dom, 1, 31),
            months=_parse_field(month, 1, 12, _MONTHS),
            days_of_week=None if dow == "?" else _parse_field(dow, 1, 7, _DAYS),
            years=_parse_field(year, 1970, 2199),
        )

    def _day_matches(self, moment: datetime) -> bool:
        if self.days_of_month is not None:
            return moment.day in self.days_of_month
        assert self.days_of_week is not None
        return (moment.isoweekday() % 7) + 1 in self.days_of_week

    def next_after(self, moment: datetime) -> datetime | None:
        """The first firing time strictly after ``moment`` (UTC), or ``None`` if none is left."""
        moment = moment.astimezone(UTC).replace(second=0, microsecond=0) + timedelta(minutes=1)
        limit = moment + timedelta(days=366 * _LIMIT_YEARS)
        while moment < limit:
            if moment.year not in self.years:
                moment = datetime(moment.year + 1, 1, 1, tzinfo=UTC)
            elif moment.month not in self.months:
                year, month = divmod(moment.month, 12)
                moment = datetime(moment.year + year, month + 1, 1, tzinfo=UTC)
            elif not self._day_matches(moment):
                moment = (moment + timedelta(days=1)).replace(hour=0, minute=0)
            elif moment.hour not in self.hours:
                moment = (moment + timedelta(hours=1)).replace(minute=0)
            elif moment.minute not in self.minutes:
                moment += timedelta(minutes=1)
            else:
                return moment
        return None
