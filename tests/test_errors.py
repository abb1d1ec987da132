from radium.errors import ConfigError, Kind, RadiumError, UnsafePathError


def test_one_line_joins_message_and_hint() -> None:
    err = ConfigError("bad key\nin file", hint="fix it")
    assert err.one_line() == "bad key in file; fix it"
    assert err.kind == Kind.INVALID_ARGUMENT


def test_leaves_share_one_root() -> None:
    assert issubclass(UnsafePathError, RadiumError)
    assert UnsafePathError("x").kind == Kind.PERMISSION_DENIED
