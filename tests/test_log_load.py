"""The log under pipelined load: admission must keep up with a burst of puts."""

from __future__ import annotations

import socket
from pathlib import Path

import beanpole


def test_pipelined_puts_are_not_refused_while_spares_are_prepared(tmp_path: Path) -> None:
    # With 1 MiB segments the space reserved for deletes passes a whole segment
    # every ~61,000 jobs; each time, a burst must find the next spare already there.
    with beanpole.Server(port=0, binlog_dir=str(tmp_path), segment_size=1 << 20) as srv:
        address = srv.address
        assert isinstance(address, tuple)
        with socket.create_connection(address) as sock, sock.makefile("rb") as replies:
            put = b"put 0 0 120 100\r\n" + b"x" * 100 + b"\r\n"
            done = 0
            while done < 130_000:
                sock.sendall(put * 64)
                for _ in range(64):
                    line = replies.readline()
                    assert line.startswith(b"INSERTED "), (line, done)
                    done += 1
        assert srv.stats()["current-jobs-ready"] == done
