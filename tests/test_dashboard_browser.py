"""The dashboard in a real headless browser (Debian's chromium, driven by selenium
through chromium-driver): live counts, guarded actions, stock beanstalkd through
``beanpole exporter``, and no request to any other host. Marker ``browser``; skipped
when chromium or its driver is missing (scripts/test.sh installs them)."""

from __future__ import annotations

import os
import shutil
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import greenstalk
import pytest

import beanpole
from beanpole.ops.dashboard.actions import HIDDEN_NOT_GIVEN
from dashboard_common import TIMEOUT, TOKEN, base_url, exporter, token_file
from servers import start

pytestmark = pytest.mark.browser

CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
CHROMEDRIVER = shutil.which("chromedriver") or "/usr/bin/chromedriver"
#: Where the screenshot goes when set (docs/dashboard.png for the README).
SCREENSHOT_ENV = "BEANPOLE_DASHBOARD_SCREENSHOT"


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    if not (os.access(CHROMIUM, os.X_OK) and os.access(CHROMEDRIVER, os.X_OK)):
        pytest.skip("chromium and chromium-driver are not installed "
                    "(apt-get install chromium chromium-driver)")
    selenium = pytest.importorskip("selenium", reason="selenium is not installed")
    del selenium
    from selenium import webdriver
    from selenium.webdriver.chrome.options import Options
    from selenium.webdriver.chrome.service import Service

    # The system's driver and browser, named outright: selenium's own driver manager
    # must not go looking for (or downloading) anything.
    os.environ["SE_OFFLINE"] = "true"
    options = Options()
    options.binary_location = CHROMIUM
    for arg in ("--headless=new", "--disable-gpu", "--disable-dev-shm-usage",
                "--window-size=1400,1100", "--no-first-run", "--disable-extensions",
                "--disable-background-networking", "--disable-sync",
                "--disable-component-update", "--disable-default-apps"):
        options.add_argument(arg)
    if os.geteuid() == 0:
        options.add_argument("--no-sandbox")  # chromium refuses to run as root otherwise
    driver = webdriver.Chrome(service=Service(CHROMEDRIVER), options=options)
    driver.set_page_load_timeout(TIMEOUT)
    yield driver
    driver.quit()


def wait(driver: Any, condition: Callable[[Any], Any], timeout: float = TIMEOUT) -> Any:
    from selenium.webdriver.support.ui import WebDriverWait

    return WebDriverWait(driver, timeout, poll_frequency=0.05).until(condition)


def text_of(driver: Any, css: str) -> str | None:
    """The text of the first element ``css`` selects, or None; read in one script, so
    a table redrawn meanwhile cannot leave a stale element behind."""
    text: str | None = driver.execute_script(
        "const e = document.querySelector(arguments[0]); return e ? e.textContent : null",
        css,
    )
    return text


def cell(tube: str, key: str) -> str:
    return f'#tubes tr[data-tube="{tube}"] td[data-key="{key}"]'


def find(driver: Any, css: str) -> Any:
    from selenium.webdriver.common.by import By

    return driver.find_element(By.CSS_SELECTOR, css)


def open_page(driver: Any, url: str) -> None:
    driver.get(url)
    driver.execute_script("sessionStorage.clear()")
    driver.get(url)
    wait(driver, lambda d: text_of(d, "#link-state") == "live")


def address_of(srv: beanpole.Server) -> tuple[str, int]:
    address = srv.address
    assert isinstance(address, tuple)
    return address


# -- the tests ------------------------------------------------------------------------


def test_the_table_shows_counts_and_a_put_shows_up_without_a_reload(browser: Any) -> None:
    with beanpole.Server(port=0, http="127.0.0.1:0") as srv:
        assert srv.http_address is not None
        with greenstalk.Client(address_of(srv), use="emails") as c:
            for _ in range(3):
                c.put("hello")
            c.put("later", delay=120)
            open_page(browser, base_url(srv.http_address) + "/")
            wait(browser, lambda d: text_of(d, cell("emails", "current-jobs-ready")) == "3")
            assert text_of(browser, cell("emails", "current-jobs-delayed")) == "1"
            assert text_of(browser, '#server-stats [data-key="ready"] dd') == "3"
            # beanpole's own version, beside the protocol's the wire reports.
            version = text_of(browser, '#server-stats [data-key="version"] dd')
            assert version == f"{beanpole.__version__} (protocol 1.13)"
            browser.execute_script("window.stillTheSamePage = true")
            c.put("one more")
            # Within 2 s, and the page was not reloaded to get there.
            wait(browser, lambda d: text_of(d, cell("emails", "current-jobs-ready")) == "4", 2)
            assert browser.execute_script("return window.stillTheSamePage") is True
            # Filter and sort, done by the server.
            c.use("other")
            c.put("x")
            wait(browser, lambda d: text_of(d, cell("other", "current-jobs-ready")) == "1")
            find(browser, "#filter").send_keys("EMA")
            wait(browser, lambda d: text_of(d, cell("other", "name")) is None)
            assert text_of(browser, cell("emails", "name")) == "emails"
            find(browser, "#filter").clear()
            find(browser, "#filter").send_keys("e")  # all three have an e
            wait(browser, lambda d: text_of(d, cell("other", "name")) == "other")
            find(browser, '#tubes th[data-sort="current-jobs-ready"]').click()

            def first_rows(d: Any) -> list[str]:
                rows: list[str] = d.execute_script(
                    "return [...document.querySelectorAll('#tubes tbody tr')]"
                    ".map(r => r.dataset.tube)"
                )
                return rows

            wait(browser, lambda d: first_rows(d)[:2] == ["emails", "other"])


def test_an_action_without_the_token_is_refused_and_with_it_works(
    browser: Any, tmp_path: Path
) -> None:
    events: list[beanpole.Event] = []
    seen = threading.Event()
    srv = beanpole.Server(
        port=0, http="127.0.0.1:0", admin_token_file=str(token_file(tmp_path))
    )

    @srv.hook("kick")
    def on_kick(event: beanpole.Event) -> None:
        events.append(event)
        seen.set()

    markup = '<img src="/x" id="injected"><script>window.pwned = 1</script>'
    with srv, greenstalk.Client(address_of(srv), use="mail", watch="mail") as c:
        assert srv.http_address is not None
        c.put(markup)
        c.bury(c.reserve(timeout=1))
        c.put("ready one")
        open_page(browser, base_url(srv.http_address) + "/#/tube/mail")
        # Without the token the job is shown, its body is not, and the page says why.
        hidden = '#next-jobs article[data-job="1"] .hidden-body'
        wait(browser, lambda d: text_of(d, hidden) == HIDDEN_NOT_GIVEN)
        assert text_of(browser, '#next-jobs article[data-job="1"] pre') is None
        assert text_of(browser, "#token-state") == "bodies and actions need the token"

        find(browser, "#kick-form button").click()
        wait(browser, lambda d: (text_of(d, "#action-status") or "").startswith("refused (401)"))
        assert srv.tube_stats("mail")["current-jobs-buried"] == 1

        find(browser, "#token").send_keys("wrong")
        find(browser, "#token-use").click()
        wait(browser, lambda d: "wrong token" in (text_of(d, "#link-state") or ""))
        find(browser, "#kick-form button").click()
        wait(browser, lambda d: "wrong admin token" in (text_of(d, "#action-status") or ""))
        assert srv.tube_stats("mail")["current-jobs-buried"] == 1
        assert text_of(browser, '#next-jobs article[data-job="1"] pre') is None

        find(browser, "#token").clear()
        find(browser, "#token").send_keys(TOKEN)
        find(browser, "#token-use").click()
        # With the token the body is there, as text in the page, not markup.
        wait(browser, lambda d: text_of(d, '#next-jobs article[data-job="1"] pre') == markup)
        assert browser.find_elements("css selector", "#injected") == []
        assert browser.execute_script("return window.pwned") is None
        find(browser, "#kick-form button").click()
        wait(browser, lambda d: (text_of(d, "#action-status") or "").startswith("done"))
        assert text_of(browser, "#action-status") == 'done: {"kicked":1}'
        stats = srv.tube_stats("mail")
        assert (stats["current-jobs-buried"], stats["current-jobs-ready"]) == (0, 2)
        assert seen.wait(TIMEOUT) and events[0].job_id == 1 and events[0].tube == "mail"

        # Clearing asks for the tube's name first.
        from selenium.webdriver.support.ui import Select

        Select(find(browser, "#clear-state")).select_by_visible_text("ready")
        find(browser, "#clear-form button").click()
        wait(browser, lambda d: find(d, "#clear-confirm").is_displayed())
        find(browser, "#clear-name").send_keys("mail")
        find(browser, "#clear-go").click()
        cleared = 'done: {"deleted":2,"state":"ready"}'
        wait(browser, lambda d: text_of(d, "#action-status") == cleared)
        assert srv.tube_stats("mail")["current-jobs-ready"] == 0


def test_bodies_are_hidden_without_the_read_token_and_shown_with_it(
    browser: Any, tmp_path: Path
) -> None:
    """A read token only: job bodies need it (the page says so), actions stay off."""
    read = token_file(tmp_path, "read-only-token-42", "read-token")
    srv = beanpole.Server(port=0, http="127.0.0.1:0", http_read_token_file=str(read))
    with srv, greenstalk.Client(address_of(srv), use="jobs") as c:
        assert srv.http_address is not None
        job_id = c.put("secret payload")
        open_page(browser, base_url(srv.http_address) + f"/#/job/{job_id}")
        card = f'#job-card article[data-job="{job_id}"]'
        wait(browser, lambda d: text_of(d, card + " .hidden-body") == HIDDEN_NOT_GIVEN)
        assert text_of(browser, card + " pre") is None
        assert "secret payload" not in browser.page_source
        assert text_of(browser, "#token-state") == "bodies need the token"
        find(browser, "#token").send_keys("read-only-token-42")
        find(browser, "#token-use").click()
        wait(browser, lambda d: text_of(d, card + " pre") == "secret payload")
        assert text_of(browser, card + " .hidden-body") is None
        assert text_of(browser, "#token-state") == "token set"
        # The read token does not act.
        find(browser, card + " .delete-job").click()
        wait(browser, lambda d: (text_of(d, "#action-status") or "").startswith("refused (403)"))
        assert srv.stats()["current-jobs-ready"] == 1
        # Forgotten, the body is hidden again.
        find(browser, "#token-forget").click()
        wait(browser, lambda d: text_of(d, card + " .hidden-body") == HIDDEN_NOT_GIVEN)


def test_the_page_works_against_stock_beanstalkd_through_the_exporter(
    browser: Any, tmp_path: Path
) -> None:
    from selenium.webdriver.support.ui import Select

    with start("beanstalkd") as bs, start("beanpole") as bp:
        targets = [f"{s.host}:{s.port}" for s in (bs, bp)]
        with greenstalk.Client(bs.address, use="orders") as c:
            first = c.put("order 1")
            c.put("order 2")
        with greenstalk.Client(bp.address, use="invoices") as c:
            c.put("invoice")
        child, base = exporter(targets, token_file(tmp_path))
        try:
            open_page(browser, base + "/")
            assert find(browser, "#server-pick").is_displayed()  # a selector: two servers
            wait(browser, lambda d: text_of(d, cell("orders", "current-jobs-ready")) == "2")
            version = text_of(browser, '#server-stats [data-key="version"] dd') or ""
            assert version.startswith("1.")  # Debian's beanstalkd
            Select(find(browser, "#server-select")).select_by_visible_text(targets[1])
            wait(browser, lambda d: text_of(d, cell("invoices", "current-jobs-ready")) == "1")
            assert text_of(browser, cell("orders", "name")) is None
            Select(find(browser, "#server-select")).select_by_visible_text(targets[0])
            wait(browser, lambda d: text_of(d, cell("orders", "name")) == "orders")
            # A job looked up by id, deleted with the token.
            find(browser, "#token").send_keys(TOKEN)
            find(browser, "#token-use").click()
            find(browser, "#job-id").send_keys(str(first))
            find(browser, "#job-form button").click()
            wait(browser, lambda d: text_of(d, "#job-card pre") == "order 1")
            find(browser, "#job-card .delete-job").click()
            wait(browser, lambda d: (text_of(d, "#action-status") or "").startswith("done"))
            with greenstalk.Client(bs.address) as c:
                assert c.stats_tube("orders")["current-jobs-ready"] == 1
                with pytest.raises(greenstalk.NotFoundError):
                    c.peek(first)
            assert child.stop() == 0
        finally:
            child.kill()


def test_no_request_leaves_for_another_host(browser: Any, tmp_path: Path) -> None:
    """Also takes the screenshot of the README (to $BEANPOLE_DASHBOARD_SCREENSHOT)."""
    stop = threading.Event()
    with beanpole.Server(port=0, http="127.0.0.1:0") as srv:
        assert srv.http_address is not None
        base = base_url(srv.http_address)
        address = address_of(srv)
        with greenstalk.Client(address, use="emails") as c:
            for tube, ready in (("emails", 42), ("thumbnails", 7), ("reports", 3)):
                c.use(tube)
                for i in range(ready):
                    c.put(f"{tube} {i}", delay=0 if i % 5 else 600)
            c.use("webhooks")
            c.put("retry me")
            c.watch("webhooks")
            c.bury(c.reserve(timeout=1))

        def traffic() -> None:
            with greenstalk.Client(address, use="thumbnails", watch="thumbnails") as w:
                while not stop.is_set():
                    w.put("resize")
                    job = w.reserve(timeout=1)
                    w.delete(job)
                    stop.wait(0.02)

        worker = threading.Thread(target=traffic, daemon=True)
        worker.start()
        try:
            open_page(browser, base + "/")
            # Some seconds of history in the charts.
            wait(browser, lambda d: d.execute_script(
                "const p = document.querySelector('#chart-puts polyline');"
                "return p ? p.getAttribute('points').split(' ').length : 0") >= 12)
            wait(browser, lambda d: text_of(d, cell("webhooks", "current-jobs-buried")) == "1")
            entries = browser.execute_script(
                "return performance.getEntries()"
                ".filter(e => ['navigation', 'resource'].includes(e.entryType))"
                ".map(e => e.name)"
            )
            assert any(name.startswith(base + "/api/tubes") for name in entries)
            assert all(name.startswith(base + "/") for name in entries), entries
            urls = browser.execute_script(
                "return [...document.querySelectorAll('[src],[href]')]"
                ".map(e => e.src || e.href)"
            )
            assert all(u.startswith((base + "/", "data:")) for u in urls), urls
            shot = Path(os.environ.get(SCREENSHOT_ENV) or tmp_path / "dashboard.png")
            assert browser.save_screenshot(str(shot))
            assert shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
        finally:
            stop.set()
            worker.join(TIMEOUT)


def test_a_cluster_nodes_page_shows_its_panel_and_why_it_is_not_ready(browser: Any) -> None:
    from beanpole.ops.served_node import ServedNode

    with beanpole.Cluster(nodes=3) as cluster:
        leader = cluster.leader()
        native = cluster.node(leader)
        assert native is not None and cluster.cluster_file is not None
        node = ServedNode(
            cluster.cluster_file, leader, beanpole.Config(http="127.0.0.1:0"),
            election_timeout_ms=600, probe_every=0.2,
        )  # fmt: skip
        node.listen()
        node.start(native)
        try:
            assert node.http_address is not None
            with greenstalk.Client(cluster.address(leader), use="replicated") as c:
                c.put("kept by a majority")
            open_page(browser, base_url(node.http_address) + "/")
            wait(browser, lambda d: text_of(d, cell("replicated", "current-jobs-ready")) == "1")
            facts = '#cluster-facts [data-key="{}"] dd'
            assert text_of(browser, facts.format("role")) == "leader"
            assert text_of(browser, facts.format("leader")) == str(leader)
            assert text_of(browser, facts.format("ready")) == "yes"
            others = [n for n in cluster.nodes if n != leader]
            up = '#cluster-members tr[data-node="{}"] td[data-key="up"]'
            for n in others:
                wait(browser, lambda d, n=n: text_of(d, up.format(n)) == "yes")
            assert find(browser, "#cluster-reason").is_displayed() is False

            for n in others:
                cluster.stop_node(n)
            wait(browser, lambda d: (text_of(d, "#cluster-reason") or "").startswith(
                "not ready: no quorum: a majority of the voters last acknowledged"))
            assert find(browser, "#cluster-reason").is_displayed()
            for n in others:
                wait(browser, lambda d, n=n: (text_of(d, up.format(n)) or "").startswith("NO: "))
            assert text_of(browser, facts.format("ready")) == "no"
        finally:
            node.close()

    # A single server's page has no cluster panel.
    with beanpole.Server(port=0, http="127.0.0.1:0") as srv:
        assert srv.http_address is not None
        open_page(browser, base_url(srv.http_address) + "/")
        assert browser.execute_script("return document.getElementById('cluster-view').hidden")
