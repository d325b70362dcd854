"""Chart and page outputs for the CLI and the library: the contract between the analyses and the charts.

CONTRACT (other modules call these; keep the signatures):

- `Scenario(label, analysis, phase, plan)`: one analysis to draw; `analysis` is a core
  `GraphAnalysis` whose placements are in execution order.
- `write_model_outputs(scenarios, png=, svg=, html=, title=)`: static roofline chart of the first
  scenario's kernels (PNG/SVG) and the interactive page with a switch between all scenarios
  (HTML). Returns the paths written. Writes atomically; raises RooflineError on a bad path.
- `write_sweep_chart(rows, x, png=, svg=, ridge=, limit=, title=)`: rows are dicts with at least
  the key named by `x` (e.g. "batch") and "flop_per_byte"; draws intensity against x, the ridge
  as a horizontal line and the decode limit (if given) as an asymptote.

- `model_figure(scenarios, title=)` -> matplotlib Figure of the first scenario (for `.plot()`).
- `model_html(scenarios, title=)` -> str, the self-contained interactive page (for `_repr_html_`
  and `--html`).

STATUS: the bodies are being written (issue 4); until then they raise RooflineError.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from roofline.analysis import GraphAnalysis
from roofline.errors import RooflineError


@dataclass(frozen=True)
class Scenario:
    label: str  # e.g. "decode · flash"
    analysis: GraphAnalysis
    phase: str = ""  # "prefill" | "decode" | ""
    plan: str = ""  # "none" | "flash" | "fused" | "naive" | ""


def write_model_outputs(scenarios: Sequence[Scenario], *, png: str | None = None, svg: str | None = None,
                        html: str | None = None, title: str = "") -> list[Path]:
    raise RooflineError("chart output is not available yet")


def write_sweep_chart(rows: Sequence[Mapping[str, Any]], x: str, *, png: str | None = None, svg: str | None = None,
                      ridge: float, limit: float | None = None, title: str = "") -> list[Path]:
    raise RooflineError("chart output is not available yet")


def model_figure(scenarios: Sequence[Scenario], *, title: str = "") -> Any:
    raise RooflineError("chart output is not available yet")


def model_html(scenarios: Sequence[Scenario], *, title: str = "") -> str:
    raise RooflineError("chart output is not available yet")
