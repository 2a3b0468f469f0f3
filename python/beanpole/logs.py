"""Log lines of ``beanpole serve``: the ``beanpole`` logger, as text or JSON on stderr.

Everything the server says goes through Python's :mod:`logging` under the ``beanpole``
logger: the start line, signals, hook failures, and the engine's own lines (connections
with ``-V``, log errors), which the hook thread hands over (see :mod:`beanpole.server.hooks`).
An embedding program configures logging as it likes; ``beanpole serve`` calls
:func:`setup`.

Lowest layer: imports no other beanpole module; every layer may import it.
"""

from __future__ import annotations

import logging
import sys
import time
from typing import Final

__all__ = ["JsonFormatter", "TextFormatter", "setup"]

LOGGER: Final = "beanpole"


class TextFormatter(logging.Formatter):
    """``beanpole: message`` (with ``warning:``/``error:`` before the message when it
    is one), and the traceback after it when there is one. A record made with
    ``extra={"bare": True}`` (the start line) is written as it is."""

    def format(self, record: logging.LogRecord) -> str:
        message = record.getMessage()
        if not getattr(record, "bare", False):
            tag = ""
            if record.levelno >= logging.ERROR:
                tag = "error: "
            elif record.levelno >= logging.WARNING:
                tag = "warning: "
            message = f"beanpole: {tag}{message}"
        if record.exc_info:
            message = f"{message}\n{self.formatException(record.exc_info)}"
        return message


class JsonFormatter(logging.Formatter):
    """One JSON object per line: ``time`` (RFC 3339, UTC), ``level``, ``logger``,
    ``message``, and ``traceback`` when there is one."""

    def format(self, record: logging.LogRecord) -> str:
        stamp = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(record.created))
        entry = {
            "time": f"{stamp}.{int(record.msecs):03d}Z",
            "level": record.levelname.lower(),
            "logger": record.name,
            "message": record.getMessage(),
        }
        if record.exc_info:
            entry["traceback"] = self.formatException(record.exc_info)
        import json  # only with --log-format json

        return json.dumps(entry, ensure_ascii=False)


def setup(verbose: int, fmt: str) -> logging.Logger:
    """Send the ``beanpole`` logger to stderr in ``fmt`` (``text`` or ``json``).

    Level INFO by default (the start line, signals, warnings), DEBUG with ``-V``.
    Returns the logger.
    """
    logger = logging.getLogger(LOGGER)
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(JsonFormatter() if fmt == "json" else TextFormatter())
    for old in list(logger.handlers):
        logger.removeHandler(old)
    logger.addHandler(handler)
    logger.setLevel(logging.DEBUG if verbose > 0 else logging.INFO)
    logger.propagate = False
    return logger
