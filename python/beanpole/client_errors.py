"""The clients' error classes at the module path the native module imports them from.

``beanpole._core`` raises the classes of :mod:`beanpole.client.errors` and looks them up
by the module name ``beanpole.client_errors`` (``rust/python/src/client/items.rs``). This
module only names them there; it goes once the native module imports
``beanpole.client.errors`` itself. Nothing in the Python package imports it.

Client layer: imports the settings, ``beanpole.addr`` and the native module at most;
nothing of ``beanpole.server``, ``.ops``, ``.cli`` or ``.spark``.
"""

from __future__ import annotations

from beanpole.client.errors import *  # noqa: F403 (the same classes, by the old name)
from beanpole.client.errors import __all__ as __all__
