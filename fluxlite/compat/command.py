"""`flux CMD ARGS...`: the fluxlite command of the same name with the same
arguments; a Flux command fluxlite lacks is one line on stderr and exit 1."""

from __future__ import annotations

import sys

from ..cli import COMMANDS, HIDDEN, _quick_exit, run


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    words = [a for a in argv if not a.startswith("-")]
    if words[:1] == ["version"] and "version" not in COMMANDS:
        return _version()
    if words and (words[0] not in COMMANDS or words[0] in HIDDEN):
        print(f"flux: '{words[0]}' is a Flux command fluxlite does not provide "
              "(see 'flux --help' for those it does)", file=sys.stderr)
        return 1
    return run(argv)


def _version() -> int:
    """`flux version` where fluxlite has no version command of its own: the lines
    Flux prints, with fluxlite's version."""
    import zmq

    from .. import __version__
    print(f"commands:    \t\t{__version__}\nlibflux-core:\t\t{__version__}\n"
          f"build-options:\t\t+zmq=={zmq.zmq_version()}")
    return 0


if __name__ == "__main__":
    _quick_exit(main())
