"""Measured per-kernel tables: reading them (tables.py, pyarrow imported there only), joining each row
to our kernel of the same shape (join.py), fitting the expected-time model (fit.py, roofline.expectation)
and validating it (validate.py). The core never imports this room."""
