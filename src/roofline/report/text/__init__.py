"""Text reports: rich tables and text blocks, one module per subject (tables.py: the table renderer
and the placement and machine tables every other module builds on). rich is imported inside functions."""
