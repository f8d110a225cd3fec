"""``gnnprivacy methods``: the registered training methods (``gp.methods()`` on the command
line), and with a NAME that method's parameters.

Only the method registry is imported (no torch, no PyG), so the command is fast.
"""

from __future__ import annotations

import dataclasses
import json

import click


def _default(value) -> str:
    return "-" if value is None else str(value)


@click.command("methods")
@click.argument("name", required=False)
@click.option("--json", "as_json", is_flag=True, help="print a JSON document instead of a table")
def methods_command(name: str | None, as_json: bool) -> None:
    """List the training methods (private or baseline, what each does); with NAME, its
    parameters (the options of `gnnprivacy train --method NAME`)."""
    from gnnprivacy.api import methods

    infos = methods()
    if name is not None:
        known = {m.name: m for m in infos}
        if name.lower() not in known:
            raise click.BadParameter(f"{name!r} is not a method; choose one of "
                                     f"{', '.join(sorted(known))}", param_hint="NAME")
        infos = [known[name.lower()]]
    if as_json:
        click.echo(json.dumps([dataclasses.asdict(m) for m in infos], indent=2, default=str))
        return
    width = max(len(m.name) for m in infos)
    for m in infos:
        click.echo(f"{m.name:<{width}}  {'private ' if m.private else 'baseline'}  "
                   f"{m.description}")
    if name is None:
        click.echo("\n`gnnprivacy methods NAME` lists a method's parameters; "
                   "`gnnprivacy train --method NAME` runs it.")
        return
    from gnnprivacy.cli.options import RENAMED

    (m,) = infos
    rows = [("--" + RENAMED.get(p.name, p.name.replace("_", "-")), p.type, _default(p.default),
             p.help) for p in m.parameters]
    widths = [max(len(r[i]) for r in rows) for i in range(3)] if rows else [0, 0, 0]
    for flag, kind, default, text in rows:
        click.echo(f"  {flag:<{widths[0]}}  {kind:<{widths[1]}}  default {default:<{widths[2]}}  "
                   f"{text}")
