"""The soak's judgement (``soak_ledger.py``): each kind of violation is counted, and what the
protocols legitimately do (a late SQS delete, an uncertain send, a dead letter) is not."""

from __future__ import annotations

from soak_ledger import Delivery, Ledger, Verdict

GROUPS = {"g1": frozenset("n"), "g2": frozenset("n")}


def ledger() -> Ledger:
    return Ledger("p", {"g1": frozenset("n")})


def delivered(book: Ledger, message_id: str, attempt: int = 1, at: int = 1000, **kw) -> None:
    body = kw.pop("body", f"body-{message_id}")
    book.record_delivery(Delivery("g1", message_id, body, attempt, at, **kw))


def test_a_message_acked_once_in_each_group_is_acked_and_nothing_else() -> None:
    book = Ledger("p", GROUPS)
    book.record_sent("m1", "n")
    for group in GROUPS:
        book.record_delivery(Delivery(group, "m1", "b", 1, 1000))
        book.record_ack(group, "m1", 1)
    verdict = book.judge()
    assert (verdict.sent, verdict.acked, verdict.lost, verdict.duplicate) == (1, 2, 0, 0)
    assert verdict.ok
    assert book.backlog() == 0


def test_an_unsettled_message_is_lost_unless_it_is_a_dead_letter() -> None:
    book = ledger()
    book.record_sent("m1", "n")
    book.record_sent("m2", "n")
    book.record_dead("g1", "m2", "body-m2")
    verdict = book.judge()
    assert (verdict.lost, verdict.dead) == (1, 1)
    assert verdict.examples == {"p lost": ["g1 m1 (n, last attempt 0)"]}
    assert not verdict.ok


def test_sure_acks_of_two_deliveries_are_a_duplicate() -> None:
    book = ledger()
    book.record_sent("m1", "n")
    delivered(book, "m1", 1)
    delivered(book, "m1", 2)
    book.record_ack("g1", "m1", 1)
    book.record_ack("g1", "m1", 2)
    assert book.judge().duplicate == 1


def test_a_delivery_after_a_sure_ack_is_a_duplicate_whatever_order_it_was_recorded_in() -> None:
    book = ledger()
    book.record_sent("m1", "n")
    delivered(book, "m1", 2)  # recorded by another thread before the ack of attempt 1
    delivered(book, "m1", 1)
    book.record_ack("g1", "m1", 1)
    verdict = book.judge()
    assert verdict.duplicate == 1
    assert "p delivered after a sure ack" in verdict.examples


def test_a_surely_acked_dead_letter_is_a_duplicate() -> None:
    book = ledger()
    book.record_sent("m1", "n")
    delivered(book, "m1")
    book.record_ack("g1", "m1", 1)
    book.record_dead("g1", "m1", "body-m1")
    assert book.judge().duplicate == 1


def test_a_delete_not_known_in_time_settles_its_delivery_only_if_it_was_the_last() -> None:
    book = ledger()
    book.record_sent("m1", "n")
    book.record_sent("m2", "n")
    delivered(book, "m1", 1)
    book.record_ack("g1", "m1", 1, sure=False)
    delivered(book, "m2", 1)
    book.record_ack("g1", "m2", 1, sure=False)
    delivered(book, "m2", 2)  # the late delete did not take effect: m2 came again
    verdict = book.judge()
    assert (verdict.acked, verdict.lost, verdict.duplicate) == (1, 1, 0)


def test_a_delivery_before_its_due_time_is_early() -> None:
    book = ledger()
    book.record_sent("m1", "n", due_ms=5000)
    book.record_sent("m2", "n", due_ms=5000)
    book.record_sent("m3", "n", due_ms=5000)
    delivered(book, "m1", at=4999)
    delivered(book, "m2", at=9000, visible_at=4000)  # made visible before it was due
    delivered(book, "m3", at=5000, visible_at=5000)
    for message_id in ("m1", "m2", "m3"):
        book.record_ack("g1", message_id, 1)
    verdict = book.judge()
    assert verdict.early == 2
    assert not verdict.ok


def test_a_rolled_back_message_seen_by_id_or_body_or_in_the_dead_letters_is_visible() -> None:
    book = ledger()
    book.record_rolled_back("m1", "b1")
    book.record_rolled_back("m2", "b2")
    book.record_rolled_back("m3", "b3")
    delivered(book, "m1", body="other")
    delivered(book, "x2", body="b2")
    book.record_dead("g1", "m3", "b3")
    verdict = book.judge()
    assert (verdict.sent, verdict.rolled_back_visible) == (0, 3)


def test_a_delivery_of_a_message_never_sent_fails_unless_its_send_was_uncertain() -> None:
    book = ledger()
    book.record_uncertain("maybe")
    delivered(book, "m1", body="maybe")
    assert book.judge().ok
    delivered(book, "m2", body="never")
    verdict = book.judge()
    assert verdict.unsent == 1
    assert not verdict.ok


def test_a_broken_deduplication_is_a_duplicate() -> None:
    book = ledger()
    book.dedup_broken.append("d-1: first m1, resent m2")
    assert book.judge().duplicate == 1


def test_verdicts_add_up_and_print_the_soak_line() -> None:
    total = Verdict(sent=2, acked=3, dead=1).add(Verdict(sent=1, lost=1, early=2))
    assert total.line() == (
        "sent 3, acked 3, dead-lettered 1, lost 1, duplicate acks 0, early 2, rolled-back visible 0"
    )
