"""greenstalk's constants, classes and exceptions, and the errors that server replies raise."""

from __future__ import annotations

import socket

import greenstalk
import pytest

from servers import Running


def test_module_constants_and_job_class() -> None:
    assert greenstalk.DEFAULT_TUBE == "default"
    assert greenstalk.DEFAULT_PRIORITY == 2**16
    assert greenstalk.DEFAULT_DELAY == 0
    assert greenstalk.DEFAULT_TTR == 60
    job = greenstalk.Job(7, "body")
    assert (job.id, job.body) == (7, "body")
    assert repr(job) == "greenstalk.Job(id=7, body='body')"


def test_exception_hierarchy() -> None:
    server_errors = [
        greenstalk.BadFormatError,
        greenstalk.BuriedError,
        greenstalk.DeadlineSoonError,
        greenstalk.DrainingError,
        greenstalk.ExpectedCrlfError,
        greenstalk.InternalError,
        greenstalk.JobTooBigError,
        greenstalk.NotFoundError,
        greenstalk.NotIgnoredError,
        greenstalk.OutOfMemoryError,
        greenstalk.TimedOutError,
        greenstalk.UnknownCommandError,
    ]
    for cls in server_errors:
        assert issubclass(cls, greenstalk.BeanstalkdError)
    assert issubclass(greenstalk.BeanstalkdError, greenstalk.Error)
    assert issubclass(greenstalk.UnknownResponseError, greenstalk.Error)
    assert not issubclass(greenstalk.UnknownResponseError, greenstalk.BeanstalkdError)
    # BURIED carries the id of the job the server buried (put/release under memory pressure).
    assert greenstalk.BuriedError([b"42"]).id == 42
    assert greenstalk.BuriedError().id is None


# --------------------------------------------------------------------------- protocol errors


def test_bad_priority_desynchronises_greenstalk(any_server: Running) -> None:
    """beanstalkd answers BAD_FORMAT to the put line, then reads the body as a command."""
    with greenstalk.Client(any_server.address) as c:
        with pytest.raises(greenstalk.BadFormatError):
            c.put("orphan body", priority=2**32)
        with pytest.raises(greenstalk.UnknownCommandError):
            c.using()  # reads the UNKNOWN_COMMAND for the line "orphan body"
        with pytest.raises(greenstalk.UnknownResponseError) as info:
            c.watching()  # reads the "USING default" meant for using()
        assert (info.value.status, info.value.values) == (b"USING", [b"default"])
    with greenstalk.Client(any_server.address) as fresh:
        assert fresh.stats()["total-jobs"] == 0
        assert fresh.put("next") == 1  # no job id was used up


def test_unknown_command_and_unknown_response(any_server: Running) -> None:
    """Replies greenstalk's own commands never provoke, read from a socket it was handed."""
    sock = socket.create_connection(any_server.address)
    with greenstalk.Client(sock) as c:
        sock.sendall(b"frobnicate\r\n")
        with pytest.raises(greenstalk.UnknownCommandError):
            c.kick(1)  # reads the UNKNOWN_COMMAND; "KICKED 0" stays queued
        with pytest.raises(greenstalk.UnknownResponseError) as info:
            c.tubes()  # reads "KICKED 0" where it expects OK
        assert (info.value.status, info.value.values) == (b"KICKED", [b"0"])


def test_expected_crlf_and_unknown_response(any_server: Running) -> None:
    sock = socket.create_connection(any_server.address)
    with greenstalk.Client(sock) as c:
        # a body whose trailing two bytes are not CRLF
        sock.sendall(b"put 0 0 10 3\r\nabcXY")
        with pytest.raises(greenstalk.ExpectedCrlfError):
            c.using()  # its own "USING default" reply is now queued behind
        with pytest.raises(greenstalk.UnknownResponseError) as info:
            c.watch("x")  # reads "USING default" where it expects WATCHING
        assert info.value.status == b"USING"
        assert info.value.values == [b"default"]
