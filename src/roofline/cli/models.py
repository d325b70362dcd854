"""`roofline models`: the model presets, one row each (what `roofline model ID` takes besides a config.json).

Parses its options, asks roofline.report.text.model for the rows and prints them.
"""

from __future__ import annotations

import click

from roofline.cli.common import dump, echo


@click.command("models")
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
def models_command(as_json: bool) -> None:
    """List the model presets: id, family, parameters, layers, attention, experts, dtypes.

    \b
    Examples:
      roofline models
      roofline models --json
      roofline model llama-3-8b --batch 8 --context 4096
    """
    from roofline.report.text.model import preset_rows, presets_text

    rows = preset_rows()
    if as_json:
        dump(rows)
    else:
        echo(presets_text(rows))


COMMANDS = (models_command,)
