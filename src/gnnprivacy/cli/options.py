"""Build click options from config dataclasses, so parameters are declared once."""

from __future__ import annotations

import dataclasses
from typing import Any

import click

_TYPES = {"int": click.INT, "float": click.FLOAT, "str": click.STRING, "bool": bool}

#: field name -> its option name where the field's own name would be ambiguous on the command
#: line (``--M`` and ``--m`` differ only by case). The old spelling stays a hidden alias.
RENAMED = {"M": "neighbor-multiplier", "m": "sampled-features"}
#: fields naming directories get a path type (``--data-root`` reads, ``--runs-dir`` writes)
_PATH_FIELDS = {"data_root": click.Path(file_okay=False), "runs_dir": click.Path(file_okay=False)}
_ALIAS_SUFFIX = "__alias"


def _base_type(annotation: Any) -> str:
    text = annotation if isinstance(annotation, str) else getattr(annotation, "__name__", str(annotation))
    parts = [p.strip() for p in text.split("|") if p.strip() != "None"]
    if len(parts) != 1 or parts[0] not in _TYPES:
        raise TypeError(f"config field type {text!r} is not supported by the CLI builder")
    return parts[0]


def collect_fields(groups: list[tuple[str, type]]) -> dict[str, dict[str, Any]]:
    """Union of dataclass fields across ``(owner, dataclass)`` pairs, keyed by field name.

    A field shared by several owners must have the same type; its help names the owners.
    """
    fields: dict[str, dict[str, Any]] = {}
    for owner, cls in groups:
        for f in dataclasses.fields(cls):
            kind = _base_type(f.type)
            entry = fields.setdefault(f.name, {"kind": kind, "help": f.metadata.get("help", ""),
                                               "owners": [], "defaults": {}})
            if entry["kind"] != kind:
                raise TypeError(f"field {f.name!r} is {entry['kind']} in one method and {kind} in {owner}")
            entry["owners"].append(owner)
            default = f.default if f.default is not dataclasses.MISSING else None
            entry["defaults"][owner] = default
    return fields


def add_options(command, fields: dict[str, dict[str, Any]], *, common: set[str]):
    """Decorate ``command`` with one ``--kebab-name`` option per field (default ``None`` = unset)."""
    for name in sorted(fields, reverse=True):
        entry = fields[name]
        flag = "--" + RENAMED.get(name, name.replace("_", "-"))
        defaults = set(map(repr, entry["defaults"].values()))
        default_text = next(iter(defaults)) if len(defaults) == 1 else "per method"
        scope = "" if name in common else f" [methods: {', '.join(entry['owners'])}]"
        help_text = f"{entry['help']} (default: {default_text}){scope}"
        if entry["kind"] == "bool":
            option = click.option(f"{flag}/--no-{name.replace('_', '-')}", name, default=None,
                                  help=help_text)
        else:
            kind = _PATH_FIELDS.get(name, _TYPES[entry["kind"]])
            option = click.option(flag, name, type=kind, default=None, help=help_text)
        command = option(command)
        if name in RENAMED:  # the old spelling, hidden
            command = click.option("--" + name, name + _ALIAS_SUFFIX, type=_TYPES[entry["kind"]],
                                   default=None, hidden=True)(command)
    return command


def merge_aliases(options: dict[str, Any]) -> dict[str, Any]:
    """Fold hidden alias options (``--M``) into their field (``--neighbor-multiplier``)."""
    out = {k: v for k, v in options.items() if not k.endswith(_ALIAS_SUFFIX)}
    for key, value in options.items():
        if key.endswith(_ALIAS_SUFFIX) and value is not None:
            name = key[:-len(_ALIAS_SUFFIX)]
            if out.get(name) is not None and out[name] != value:
                raise click.UsageError(f"--{name} and --{RENAMED[name]} are the same option; "
                                       "give it once")
            out[name] = value
    return out


def import_option(command):
    """``--import MODULE`` (repeatable): the module defining a saved user model's class."""
    return click.option(
        "--import", "imports", multiple=True, metavar="MODULE",
        help="Import MODULE first (repeatable; found in the current folder too, as `python -m` "
             "finds it): the module defining a saved user model's class; a model file never "
             "chooses what is imported.")(command)


def importable_from_cwd(imports) -> tuple[str, ...]:
    """``imports`` unchanged, with the current folder on ``sys.path`` when any is given: the
    console script, unlike ``python -m``, does not put it there, so ``--import mymodels`` run
    beside ``mymodels.py`` would not find it (appended: an installed module of the same name
    still wins)."""
    import os
    import sys

    if imports:
        here = os.getcwd()
        if not any(os.path.abspath(p or os.curdir) == here for p in sys.path):
            sys.path.append(here)
    return tuple(imports)
