"""Text reports: tables and text blocks, one module per subject (tables.py: the table renderer and the
placement and machine tables every other module builds on; grid.py: tables drawn without rich where they
fit unwrapped). rich is imported inside functions, only where a table must wrap."""
