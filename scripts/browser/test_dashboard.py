"""Browser test of `coolgp dashboard` (Debian chromium driven by Playwright).

Run by scripts/ci_browser.sh, which starts a 3-node path fleet and three dashboards and sets:
  DASHBOARD_URL              the fleet's dashboard
  DASHBOARD_BRIEF_URL        the same fleet's dashboard in brief mode (--full-status-limit 1)
  EXPECT_NODES, EXPECT_POINTS the fleet's size and total data points
  DASHBOARD_UNKNOWN_URL      a dashboard watching a fleet that does not exist
  DASHBOARD_UNREACHABLE_URL  a dashboard whose --connect endpoint has nothing behind it
"""

import os
from urllib.parse import urlparse

import pytest
from playwright.sync_api import sync_playwright

from chromium import launch

if "DASHBOARD_URL" not in os.environ:
    pytest.skip("DASHBOARD_URL not set: run scripts/ci_browser.sh", allow_module_level=True)

URL = os.environ["DASHBOARD_URL"]
NODES = int(os.environ.get("EXPECT_NODES", "3"))
POINTS = float(os.environ["EXPECT_POINTS"])


@pytest.fixture(scope="module")
def browser():
    with sync_playwright() as p:
        b = launch(p)
        yield b
        b.close()


@pytest.fixture
def page(browser):
    pg = browser.new_page(viewport={"width": 1400, "height": 900})
    pg.requests = []
    pg.errors = []
    pg.on("request", lambda r: pg.requests.append(r.url))
    pg.on("pageerror", lambda e: pg.errors.append(str(e)))
    yield pg
    pg.close()


def test_page_shows_every_node_with_its_fleet_points_and_the_network(page):
    page.goto(URL)
    # Every node converges to the fleet's total; the page must show exactly that.
    page.wait_for_function(
        """([n, total]) => {
            const rows = document.querySelectorAll('[data-node-id]');
            return rows.length === n &&
                [...rows].every(r => Number(r.dataset.fleetPoints) === total);
        }""",
        arg=[NODES, POINTS],
        timeout=60_000,
    )
    rows = page.locator("[data-node-id]")
    ids = sorted(int(rows.nth(i).get_attribute("data-node-id")) for i in range(rows.count()))
    assert ids == list(range(NODES))
    for i in range(rows.count()):
        assert float(rows.nth(i).get_attribute("data-fleet-points")) == POINTS

    # The network: one circle per node, the path's n-1 edges, coloured as "all points".
    assert page.locator("#net [data-svg-node] circle").count() == NODES
    edges = page.locator("#net line.edge")
    assert edges.count() == NODES - 1
    assert sorted(edges.nth(i).get_attribute("data-edge") for i in range(edges.count())) == [
        f"{i}-{i + 1}" for i in range(NODES - 1)
    ]
    fills = page.eval_on_selector_all(
        "#net [data-svg-node] circle", "cs => cs.map(c => getComputedStyle(c).fill)"
    )
    assert len(set(fills)) == 1 and fills[0] not in ("none", "rgb(201, 206, 214)"), fills

    total = f"{int(POINTS):,}"
    assert f"every node represents {total} of {total} points" in page.inner_text("#conv-points")
    assert page.inner_text("#link") == "live"
    assert page.locator("#problems .problem").count() == 0

    # Time series appear once two polls have arrived.
    page.wait_for_selector("#chart-fp canvas", timeout=15_000)
    page.wait_for_selector("#chart-msgs canvas", timeout=15_000)

    # Nothing was loaded from outside the dashboard, and no script failed.
    origin = urlparse(URL).netloc
    outside = [u for u in page.requests if urlparse(u).netloc != origin]
    assert outside == []
    assert page.errors == []


def test_brief_mode_shows_a_grid_of_agents_and_fleet_series(page):
    url = os.environ.get("DASHBOARD_BRIEF_URL")
    if not url:
        pytest.skip("DASHBOARD_BRIEF_URL not set")
    page.goto(url)
    # One grid cell per agent, each holding the fleet's total once fused.
    page.wait_for_function(
        """([n, total]) => {
            const cells = document.querySelectorAll('#grid [data-cell-id]');
            return cells.length === n &&
                [...cells].every(c => Number(c.dataset.fleetPoints) === total);
        }""",
        arg=[NODES, POINTS],
        timeout=60_000,
    )
    cells = page.locator("#grid [data-cell-id]")
    ids = sorted(int(cells.nth(i).get_attribute("data-cell-id")) for i in range(cells.count()))
    assert ids == list(range(NODES))
    assert f"agent 0: {int(POINTS):,} of {int(POINTS):,} points" in cells.nth(0).get_attribute("title")
    # No network graph and no full-status table in brief mode; the attention table lists all 3.
    assert not page.locator("#net").is_visible()
    assert not page.locator("#nodes").is_visible()
    assert page.locator("[data-node-id]").count() == 0
    assert page.locator("#agents [data-agent-id]").count() == NODES
    assert page.inner_text("#agents-shown") == f"showing {NODES} of {NODES} agents"
    total = f"{int(POINTS):,}"
    assert f"every agent represents {total} of {total} points" in page.inner_text("#conv-points")
    assert "brief mode" in page.inner_text("#conv-proj")
    assert page.locator("#problems .problem").count() == 0
    # Fleet-level series: least, median and most fleet_points in one chart.
    page.wait_for_selector("#chart-fp canvas", timeout=15_000)
    assert "median" in page.inner_text("#chart-fp")
    assert page.errors == []


def problem_text(page, url, needle):
    page.goto(url)
    page.wait_for_function(
        "s => [...document.querySelectorAll('#problems .problem')]"
        ".some(p => p.textContent.includes(s))",
        arg=needle,
        timeout=30_000,
    )
    return page.inner_text("#problems")


def test_an_unknown_fleet_is_named_on_the_page(page):
    text = problem_text(page, os.environ["DASHBOARD_UNKNOWN_URL"], "no node of fleet")
    assert "check --fleet" in text
    assert page.locator("[data-node-id]").count() == 0


def test_an_unreachable_endpoint_is_named_on_the_page(page):
    text = problem_text(page, os.environ["DASHBOARD_UNREACHABLE_URL"], "nothing answers at")
    assert "check --connect" in text
    assert page.errors == []
