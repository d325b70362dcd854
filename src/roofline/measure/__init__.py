"""Measurement: the machine's real ceilings, real kernels timed under the roof, and PyTorch programs
traced onto the same graph the analytic models produce.

This layer sits on top of the analytic core and only produces Machines (measured ceilings), measured
times, and Graphs; nothing in the core imports it. numpy and torch are imported inside functions, so
`import roofline.measure` is cheap and works without torch.
"""

from roofline.measure.ceilings import Ceilings, catalog_match, measure_ceilings
from roofline.measure.runs import CeilingRun, MeasureSettings
from roofline.measure.timing import Timing, time_calls

__all__ = ["CeilingRun", "Ceilings", "MeasureSettings", "Timing", "catalog_match", "measure_ceilings", "time_calls"]
