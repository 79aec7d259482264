"""Shared fixtures.  Instances are started from synchronous fixtures; each one
checks on the way out that no process it started is left behind."""

import pytest

from fluxlite.testing import Instance


@pytest.fixture
def instance_factory():
    """Start instances on demand; all are stopped and leak-checked at teardown."""
    started: list[Instance] = []

    def make(size=1, **kw) -> Instance:
        inst = Instance(size, **kw)
        started.append(inst)
        return inst.start()

    yield make
    errors = []
    for inst in reversed(started):
        try:
            inst.__exit__(None, None, None)
        except AssertionError as exc:
            errors.append(str(exc))
    if errors:
        pytest.fail("; ".join(errors))


@pytest.fixture
def inst1(instance_factory):
    return instance_factory(1)


@pytest.fixture
def inst4(instance_factory):
    return instance_factory(4)
