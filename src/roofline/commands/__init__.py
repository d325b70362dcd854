"""Command groups beyond the core ones, each in its own module with a `register(cli)` function.

Each module imports only click and roofline's light modules at import time; heavy imports
(numpy, matplotlib, plotly, torch) go inside the command functions so the CLI starts fast.
"""
