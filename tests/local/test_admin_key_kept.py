"""A stack on a data dir keeps its admin key across restarts: a process that read the key
before a restart (an application, a shell with the profile loaded) still signs correctly."""

from __future__ import annotations

import stat

from cirrusmq_local.stack import ACCESS_KEY_VAR, SECRET_KEY_VAR, LocalStack


def test_a_data_dir_keeps_the_admin_key_of_its_first_start(tmp_path, monkeypatch) -> None:
    monkeypatch.delenv(ACCESS_KEY_VAR, raising=False)
    monkeypatch.delenv(SECRET_KEY_VAR, raising=False)
    first = LocalStack(data_dir=tmp_path).credentials
    again = LocalStack(data_dir=tmp_path).credentials
    assert again == first
    assert LocalStack(data_dir=tmp_path / "other").credentials != first
    assert LocalStack().credentials != first  # memory only: a fresh secret each start
    (kept,) = [p for p in tmp_path.iterdir() if p.is_file()]
    assert stat.S_IMODE(kept.stat().st_mode) == 0o600  # a secret: the owner's alone


def test_the_environment_s_key_wins_over_the_kept_one(tmp_path, monkeypatch) -> None:
    monkeypatch.delenv(ACCESS_KEY_VAR, raising=False)
    monkeypatch.delenv(SECRET_KEY_VAR, raising=False)
    LocalStack(data_dir=tmp_path)
    monkeypatch.setenv(ACCESS_KEY_VAR, "mine")
    monkeypatch.setenv(SECRET_KEY_VAR, "a-secret-of-my-own-0123456789")
    chosen = LocalStack(data_dir=tmp_path).credentials
    assert (chosen.access_key, chosen.secret_key) == ("mine", "a-secret-of-my-own-0123456789")
