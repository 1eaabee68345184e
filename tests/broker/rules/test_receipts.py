import pytest
from cirrusmq_broker.errors import InvalidReceiptHandle
from cirrusmq_broker.rules.receipts import ReceiptHandle, ReceiptSigner

HANDLE = ReceiptHandle("g", "t", 2, 99, "abcd1234", 3, 1_700_000_000_000)


def test_round_trip():
    signer = ReceiptSigner("s" * 32)
    assert signer.decode(signer.encode(HANDLE)) == HANDLE


def test_another_secret_is_refused():
    text = ReceiptSigner("a" * 32).encode(HANDLE)
    with pytest.raises(InvalidReceiptHandle):
        ReceiptSigner("b" * 32).decode(text)


@pytest.mark.parametrize("text", ["", "garbage", "a.b.c", "!!!.???", "eyJ9.AAAA"])
def test_malformed_is_refused(text):
    with pytest.raises(InvalidReceiptHandle):
        ReceiptSigner("s" * 32).decode(text)


def test_tampered_payload_is_refused():
    signer = ReceiptSigner("s" * 32)
    other = signer.encode(ReceiptHandle("g", "t", 2, 100, "abcd1234", 3, 1))
    forged = other.split(".")[0] + "." + signer.encode(HANDLE).split(".")[1]
    with pytest.raises(InvalidReceiptHandle):
        signer.decode(forged)
