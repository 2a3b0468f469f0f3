"""Helpers shared by the pystalk client tests: connecting, and checking replies and errors."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

import pystalk  # type: ignore[import-untyped]
import pytest

from servers import Running

DEFAULT_PRI = 65536  # pystalk's default priority
DEFAULT_TTR = 120  # pystalk's default time to run


def connect(running: Running, **kwargs: object) -> pystalk.BeanstalkClient:
    host, port = running.address
    return pystalk.BeanstalkClient(host, port, **kwargs)


@contextlib.contextmanager
def open_client(running: Running, **kwargs: object) -> Iterator[pystalk.BeanstalkClient]:
    c = connect(running, **kwargs)
    try:
        yield c
    finally:
        c.close()


def inserted(reply: tuple[bytes, int]) -> int:
    """pystalk's put_job returns the raw ``(b"INSERTED", id)`` pair, not just the id."""
    status, jid = reply
    assert status == b"INSERTED"
    assert isinstance(jid, int)
    return jid


def raises_beanstalk(message: str) -> contextlib.AbstractContextManager[object]:
    """Expect a ``BeanstalkError`` whose message is exactly the server's reply word."""
    return pytest.raises(pystalk.BeanstalkError, match=f"^{message}$")
