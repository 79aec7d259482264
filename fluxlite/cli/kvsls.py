"""`fluxlite kvs ls`, as flux-kvs(1)'s: names in columns that fit the window (80
columns when stdout is not a terminal and COLUMNS is unset; -w N, or -1 for one a
line), '.' after directories and '@' after links only with -F; a key that holds a
value is listed by name, a directory by its contents (-d: by name); with -R or
several directories each listing follows a 'KEY:' line, a blank line between."""

from __future__ import annotations

import os
import sys

import click

from ..errors import FluxliteError, NotFound
from ..protocol import kvs
from ..protocol.kvs import TREEOBJ


def window_width(width: int | None, one: bool) -> int:
    if one:
        return 1
    if width is not None and width >= 0:
        return width
    try:
        return os.get_terminal_size(sys.stdout.fileno()).columns
    except OSError:
        pass
    cols = os.environ.get("COLUMNS", "")
    return int(cols) if cols.isdigit() else 80


def columns(names: list[str], win: int, longest: int | None = None) -> None:
    """Flux's layout: each column as wide as the longest name plus 4, as many a line
    as fit in `win` (at least one; 0: all on one line), the last of a line unpadded."""
    if not names:
        return
    width = (longest if longest is not None else max(len(n) for n in names)) + 4
    per = len(names) if win == 0 else max(1, win // width)
    rows = [names[i:i + per] for i in range(0, len(names), per)]
    click.echo("\n".join("".join(n.ljust(width) for n in row[:-1]) + row[-1]
                          for row in rows))


class Lister:
    def __init__(self, h, namespace, *, recursive: bool, directory: bool, classify: bool,
                 win: int):
        self.h = h
        self.namespace = namespace
        self.recursive = recursive
        self.directory = directory
        self.classify = classify
        self.win = win
        self.failed = False

    def _payload(self, payload: dict) -> dict:
        return payload if self.namespace is None else {**payload, "namespace": self.namespace}

    def kind(self, key: str) -> str | None:
        """'dir', 'val' or 'symlink'; None (said on stderr) when KEY is not there."""
        try:
            obj = self.h.call("kvs.lookup", self._payload({"key": key, "flags": TREEOBJ}),
                              nodeid=0)["val"]
        except FluxliteError as exc:
            why = "No such file or directory" if isinstance(exc, NotFound) else exc.message
            print(f"fluxlite kvs ls: {key}: {why}", file=sys.stderr)
            self.failed = True
            return None
        return "dir" if obj.get("type") in ("dir", "dirref") else obj.get("type")

    def run(self, keys: tuple[str, ...]) -> int:
        dirs, singles = [], []
        for key in keys or (".",):
            name = key.rstrip(".") or "."
            kind = self.kind(name)
            if kind is None:
                continue
            if key != name and len(key) > 1 and kind != "dir":
                print(f"fluxlite kvs ls: {name}: Not a directory", file=sys.stderr)
                self.failed = True
            elif kind == "dir" and not self.directory:
                dirs.append(name)
            else:
                singles.append(name + ("." if kind == "dir" and self.classify else ""))
        label = vspace = False
        if singles:
            columns(singles, self.win)
            label = vspace = True
        label = label or self.recursive or len(dirs) > 1
        for key in dirs:
            self.listing(key, label, vspace)
            vspace = True
        return 1 if self.failed else 0

    def listing(self, key: str, label: bool, vspace: bool) -> None:
        names, links = kvs.entries(self.h.call(
            "kvs.lookup", self._payload({"key": key, "flags": kvs.READDIR}), nodeid=0))
        if label:
            click.echo(f"{chr(10) if vspace else ''}{key}:")
        shown, longest = [], 0
        for entry in names:
            name = entry[:-1] if entry.endswith(".") else entry
            longest = max(longest, len(name))   # as Flux: the widest name unmarked
            if self.classify:
                name += "." if entry.endswith(".") else "@" if name in links else ""
            shown.append(name)
        columns(shown, self.win, longest)
        if self.recursive:
            for entry in names:
                if entry.endswith("."):
                    sub = entry[:-1] if key == "." else f"{key}.{entry[:-1]}"
                    self.listing(sub, label, True)
