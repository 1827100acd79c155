"""Rendering of audit results: matplotlib plots (:mod:`reports.plots`) and the self-contained HTML
report (:mod:`reports.html`). Reports only read results; they never compute bounds."""

from reports.html import render_report

__all__ = ["render_report"]
