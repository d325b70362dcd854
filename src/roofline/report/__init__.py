"""Reports: they render, nothing else. Sits on top of the analytic core; the core never imports it.

By medium: text/ (tables and text blocks; rich only where a table must wrap), charts/ (static
charts, matplotlib), page/ (the self-contained interactive pages, plotly; its HTML, CSS and JS files
beside the modules). Shared by all three: points.py (what a point, a roof and a colour are);
outputs.py writes charts and pages to files (the contract with the CLI and the library); notebook.py
is what `.plot()` and `_repr_html_` draw.
"""
