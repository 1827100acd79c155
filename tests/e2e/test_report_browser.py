"""The report of the fixture run in headless Chromium: every image decodes (the renderer itself:
tests/reports/test_reports.py)."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from reports.html import render_report

CHROMIUM = Path("/usr/bin/chromium")


@pytest.mark.skipif(not CHROMIUM.exists(), reason="/usr/bin/chromium is not installed (CI installs Debian's "
                                                     "chromium package; this browser test runs there)")
def test_report_renders_in_headless_chromium(membership_run: Path, tmp_path: Path) -> None:
    """Open the report in headless Chromium and check every image decoded.

    The report itself has no JavaScript; a test copy appends a probe script that writes, into the DOM,
    how many images finished loading with a non-zero natural size, and --dump-dom reads it back.
    """
    html = render_report(membership_run).read_text(encoding="utf-8")
    probe = ("<script>window.addEventListener('load', function () {"
             "var imgs = Array.from(document.images);"
             "var ok = imgs.filter(function (i) { return i.complete && i.naturalWidth > 0; }).length;"
             "document.body.setAttribute('data-images', imgs.length + '/' + ok);});</script>")
    page = tmp_path / "probe.html"
    page.write_text(html.replace("</body>", probe + "</body>"), encoding="utf-8")
    profile = tmp_path / "profile"
    command = [str(CHROMIUM), "--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
               "--disable-component-update", "--disable-sync", "--no-first-run", f"--user-data-dir={profile}",
               "--enable-logging=stderr", "--v=0", "--virtual-time-budget=5000", "--dump-dom", page.as_uri()]
    done = subprocess.run(command, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    images = html.count("<img ")  # the membership report's figures (the fixture's: ROC and bounds)
    assert images >= 2 and f'data-images="{images}/{images}"' in done.stdout, done.stdout[:500]
    console_errors = [line for line in done.stderr.splitlines() if "CONSOLE" in line and "probe.html" in line]
    assert not console_errors, console_errors
