"""The interactive pages: one self-contained HTML file each, plotly inlined (roofline.py: the roofline
page and the assembly every page shares; serve.py: the serving page; levels.py: the page's view inside
the chip). Their HTML, CSS and JS are package data beside these modules."""
