"""Launching Debian's chromium under Playwright on a closed network (shared by the browser
test and the screenshot script)."""

import os

from playwright.sync_api import Playwright

# As root in a sandbox, with background networking off (the machine's network is closed).
# Playwright adds --headless and a fresh, empty --user-data-dir itself.
CHROMIUM_FLAGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]


def launch(p: Playwright):
    """Debian's chromium, headless (CHROMIUM overrides the path)."""
    return p.chromium.launch(
        executable_path=os.environ.get("CHROMIUM", "/usr/bin/chromium"),
        headless=True,
        args=CHROMIUM_FLAGS,
    )
