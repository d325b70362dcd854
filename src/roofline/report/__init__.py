"""Reports: text tables, JSON, charts. Sits on top of the analytic core; the core never imports it."""
