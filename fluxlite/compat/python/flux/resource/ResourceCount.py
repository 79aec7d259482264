"""`flux.resource.ResourceCount`: an RFC 14 count: a fixed number, a range
(min..max, max None for unbounded), or a stepped range (an operator and
operand, or the explicit values allowed), which Rv1Pool does not satisfy."""

from __future__ import annotations

_SAME = object()


class ResourceCount:
    """ResourceCount(min, max=min, values=None): `values`, if given, are the only
    counts allowed (a stepped range)."""

    def __init__(self, min: int, max=_SAME, values=None, operator: str = "+",
                 operand: int = 1):
        self.min = int(min)
        self.max = self.min if max is _SAME else (None if max is None else int(max))
        if self.max is not None and self.max < self.min:
            raise ValueError(f"count range {self.min}-{self.max} is reversed")
        self.values = None if values is None else sorted(int(v) for v in values)
        self.operator, self.operand = operator, int(operand)

    @classmethod
    def from_spec(cls, count) -> ResourceCount:
        """From a jobspec count: an integer or {min, max?, operator?, operand?}."""
        if isinstance(count, bool) or not isinstance(count, (int, dict)):
            raise ValueError(f"invalid resource count {count!r}")
        if isinstance(count, int):
            if count < 1:
                raise ValueError(f"resource count {count} must be at least 1")
            return cls(count)
        if "min" not in count:
            raise ValueError(f"resource count {count!r} has no min")
        return cls(count["min"], count.get("max"), None, count.get("operator", "+"),
                   count.get("operand", 1))

    @property
    def stepped(self) -> bool:
        """A count whose allowed values skip some between min and max."""
        if self.values is not None:
            return self.values != list(range(self.values[0], self.values[-1] + 1))
        return self.min != self.max and not (self.operator == "+" and self.operand == 1)

    def scaled(self, factor: int) -> ResourceCount:
        return ResourceCount(self.min * factor,
                             None if self.max is None else self.max * factor,
                             None if self.values is None else [v * factor
                                                               for v in self.values],
                             self.operator, self.operand)

    def __repr__(self) -> str:
        return f"ResourceCount({self.min}, {self.max})"
