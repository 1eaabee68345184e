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


def signatures(monkeypatch, signer: ReceiptSigner) -> list[bytes]:
    """The payloads ``signer`` signs from now on."""
    signed: list[bytes] = []
    sign = signer._sign

    def counting(payload: bytes) -> bytes:
        signed.append(payload)
        return sign(payload)

    monkeypatch.setattr(signer, "_sign", counting)
    return signed


def test_a_handle_this_signer_made_decodes_without_another_signature(monkeypatch):
    signer = ReceiptSigner("s" * 32)
    text = signer.encode(HANDLE)
    signed = signatures(monkeypatch, signer)
    assert [signer.decode(text), signer.decode(text)] == [HANDLE, HANDLE]
    assert signed == []


def test_a_handle_of_another_instance_is_verified_once(monkeypatch):
    text = ReceiptSigner("s" * 32).encode(HANDLE)
    signer = ReceiptSigner("s" * 32)
    signed = signatures(monkeypatch, signer)
    assert [signer.decode(text), signer.decode(text)] == [HANDLE, HANDLE]
    assert len(signed) == 1


def test_a_refused_handle_is_refused_again():
    signer = ReceiptSigner("s" * 32)
    forged = ReceiptSigner("b" * 32).encode(HANDLE)
    for _ in range(2):
        with pytest.raises(InvalidReceiptHandle):
            signer.decode(forged)


def test_the_oldest_verified_handles_are_forgotten(monkeypatch):
    monkeypatch.setattr("cirrusmq_broker.rules.receipts.VERIFIED_HANDLES", 3)
    signer = ReceiptSigner("s" * 32)
    handles = [ReceiptHandle("g", "t", 0, offset, "lease", 1, 1) for offset in range(4)]
    texts = [signer.encode(h) for h in handles]
    signed = signatures(monkeypatch, signer)
    assert [signer.decode(t) for t in texts[1:]] == handles[1:]
    assert signed == []
    assert signer.decode(texts[0]) == handles[0]  # forgotten when the fourth was made
    assert len(signed) == 1
    assert len(signer._verified) == 3
