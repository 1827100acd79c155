"""Rendering of audit results: matplotlib plots (:mod:`reports.plots`), the self-contained HTML report
(:func:`reports.html.render_report`) and how each kind's report is drawn (:mod:`reports.presentation`,
which the kinds register into). Reports only read results; they never compute bounds. Importing this
package imports nothing heavy (the kinds' records, read by ``--help``, import
:mod:`reports.presentation`)."""
