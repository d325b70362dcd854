"""Static charts: matplotlib on the Agg canvas, one module per chart (roofline.py: the roofline chart and
the axes and figure plumbing the others share; labels.py: labels that never overlap). matplotlib is
imported inside functions."""
