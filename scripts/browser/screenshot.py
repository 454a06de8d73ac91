"""Screenshot of a running dashboard: python screenshot.py URL OUT.png [SECONDS]

Waits SECONDS (default 20) on the page so that the time series fill, then saves a full-page
PNG. Used to make docs/img/dashboard.png from examples/fleet.sh + `coolgp dashboard`.
"""

import sys

from playwright.sync_api import sync_playwright

from chromium import launch


def main() -> None:
    url, out = sys.argv[1], sys.argv[2]
    wait_s = float(sys.argv[3]) if len(sys.argv) > 3 else 20.0
    with sync_playwright() as p:
        browser = launch(p)
        page = browser.new_page(viewport={"width": 1440, "height": 900})
        page.goto(url)
        page.wait_for_selector("[data-node-id]", timeout=30_000)
        page.wait_for_timeout(wait_s * 1000)
        page.screenshot(path=out, full_page=True)
        browser.close()


if __name__ == "__main__":
    main()
