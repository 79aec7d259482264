"""Unambiguous prefixes of long options, as Flux's commands (argparse) take them.

`fluxlite resource list --state=up` means `--states=up`: before a command parses
its arguments, each `--PREFIX[=VALUE]` that is not an option of that command but
begins exactly one of them is spelled out; one that begins several is an error
naming them (argparse's "ambiguous option").  Expansion stops at the first
positional word of a command that takes none of its options after it (run's
COMMAND, a group's subcommand), and at `--`, so a job's own arguments are never
touched.  The root group applies it to every command and subgroup it resolves.
"""

from __future__ import annotations

import click


def _long_options(cmd: click.Command) -> dict[str, click.Option]:
    out = {}
    for p in cmd.params:
        if isinstance(p, click.Option):
            for name in (*p.opts, *p.secondary_opts):
                if name.startswith("--"):
                    out[name] = p
    if cmd.get_help_option_names(click.Context(cmd)) is not None:
        out.setdefault("--help", None)
    return out


def _takes_value(opt: click.Option | None) -> bool:
    return opt is not None and not opt.is_flag and not opt.count


def expand(cmd: click.Command, args: list[str]) -> list[str]:
    """`args` for `cmd` with abbreviated long options spelled out."""
    longs = _long_options(cmd)
    shorts = {name: p for p in cmd.params if isinstance(p, click.Option)
              for name in p.opts if len(name) == 2 and name[0] == "-" and name[1] != "-"}
    interspersed = (not isinstance(cmd, click.Group) and
                    cmd.context_settings.get("allow_interspersed_args", True))
    out: list[str] = []
    i = 0
    while i < len(args):
        a = args[i]
        i += 1
        if a == "--":
            out.append(a)
            out += args[i:]
            break
        if a.startswith("--") and len(a) > 2:
            name, eq, value = a.partition("=")
            if name not in longs:
                matches = sorted(n for n in longs if n.startswith(name))
                if len(matches) > 1:
                    raise click.UsageError(f"ambiguous option: {name} could match "
                                           f"{', '.join(matches)}")
                if matches:
                    name = matches[0]
                    a = name + eq + value
            out.append(a)
            if not eq and _takes_value(longs.get(name)) and i < len(args):
                out.append(args[i])
                i += 1
        elif a.startswith("-") and len(a) > 1:
            out.append(a)
            if len(a) == 2 and _takes_value(shorts.get(a)) and i < len(args):
                out.append(args[i])
                i += 1
        else:
            out.append(a)
            if not interspersed:
                out += args[i:]
                break
    return out


class PrefixGroup(click.Group):
    """A group whose commands (and subgroups') take abbreviated long options."""

    def resolve_command(self, ctx, args):
        name, cmd, rest = super().resolve_command(ctx, args)
        if cmd is None:
            return name, cmd, rest
        if isinstance(cmd, click.Group) and not isinstance(cmd, PrefixGroup):
            cmd.__class__ = type(f"Prefix{type(cmd).__name__}", (PrefixGroup, type(cmd)), {})
        return name, cmd, expand(cmd, rest)
