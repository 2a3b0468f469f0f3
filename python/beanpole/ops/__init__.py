"""What operators look at: stats formatting (:mod:`.stats`), ``beanpole top``
(:mod:`.top`), Prometheus metrics (:mod:`.metrics`), the HTTP endpoint (:mod:`.http`,
:mod:`.http_loop`, :mod:`.http_wire`), the web dashboard (:mod:`.dashboard`), and the
embedded server with its endpoint wired in (:mod:`.served`).

The ops layer: above ``beanpole.server`` and ``beanpole.client``; it imports nothing of
``beanpole.cli``. This file imports nothing: each module loads its own dependencies
(rich, prometheus_client) when it is used.
"""
