"""`flux CMD ARGS...`: the fluxlite command of the same name with the same
arguments; a Flux command fluxlite lacks is one line on stderr and exit 1."""

from __future__ import annotations

import sys

from ..cli import COMMANDS, HIDDEN, _quick_exit, run


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    words = [a for a in argv if not a.startswith("-")]
    if words and (words[0] not in COMMANDS or words[0] in HIDDEN):
        print(f"flux: '{words[0]}' is a Flux command fluxlite does not provide "
              "(see 'flux --help' for those it does)", file=sys.stderr)
        return 1
    return run(argv)


if __name__ == "__main__":
    _quick_exit(main())
