"""The event-to-handler tables of the pure machines (job/actions.py,
job/execution.py), checked at import: every event type has a handler named for
it, and every `_on_` method is in the table.  A machine that breaks the rule
fails to import."""

import importlib.util
import sys
import textwrap

import pytest
from msgspec import Struct

from fluxlite.job import actions, execution
from fluxlite.util.handlers import handler_table

pytestmark = pytest.mark.timeout(30)


def _subclasses(base):
    return {c for c in vars(sys.modules[base.__module__]).values()
            if isinstance(c, type) and issubclass(c, base) and c is not base}


@pytest.mark.parametrize("machine, base", [(actions.Actions, actions.JobEvent),
                                           (execution.Execution, execution.ExecutionEvent)])
def test_the_machines_tables_cover_their_events(machine, base):
    events = _subclasses(base)
    assert len(events) >= 9
    assert set(machine.HANDLERS) == events
    for ev, fn in machine.HANDLERS.items():
        assert fn is getattr(machine, "_on_" + ev.__name__)
    handlers = {n for n in vars(machine) if n.startswith("_on_")}
    assert handlers == {fn.__name__ for fn in machine.HANDLERS.values()}


class Event(Struct, frozen=True):
    pass


class Started(Event):
    pass


class Stopped(Event):
    pass


class NotAnEvent(Struct, frozen=True):
    pass


class Machine:
    def _on_Started(self, ev):
        return "started"

    def _on_Stopped(self, ev):
        return "stopped"


def test_a_complete_table_is_returned():
    table = handler_table(Machine, Event, {Started: Machine._on_Started,
                                           Stopped: Machine._on_Stopped})
    assert table[Stopped](Machine(), Stopped()) == "stopped"


def test_a_missing_handler_is_refused():
    with pytest.raises(TypeError, match=r"no handler for Stopped \(add _on_Stopped\)"):
        handler_table(Machine, Event, {Started: Machine._on_Started})


def test_a_handler_named_for_another_event_is_refused():
    with pytest.raises(TypeError, match="_on_Started handles Stopped: name it "
                                                "_on_Stopped"):
        handler_table(Machine, Event, {Started: Machine._on_Started,
                                       Stopped: Machine._on_Started})


def test_an_on_method_left_out_of_the_table_is_refused():
    class Bigger(Machine):
        def _on_Stoped(self, ev):        # misspelled: would never be called
            return None

        _on_Started = Machine._on_Started
        _on_Stopped = Machine._on_Stopped

    with pytest.raises(TypeError, match=r"Bigger\._on_Stoped is in no handler table"):
        handler_table(Bigger, Event, {Started: Bigger._on_Started,
                                      Stopped: Bigger._on_Stopped})


def test_a_function_that_is_not_the_machines_is_refused():
    def _on_Stopped(self, ev):
        return None

    with pytest.raises(TypeError, match="_on_Stopped is not a method of Machine"):
        handler_table(Machine, Event, {Started: Machine._on_Started, Stopped: _on_Stopped})


def test_a_type_that_is_no_event_is_refused():
    with pytest.raises(TypeError, match="NotAnEvent is no subclass of Event"):
        handler_table(Machine, Event, {Started: Machine._on_Started,
                                       Stopped: Machine._on_Stopped,
                                       NotAnEvent: Machine._on_Stopped})


def test_a_machine_with_a_missing_handler_fails_at_import(tmp_path):
    src = tmp_path / "broken_machine.py"
    src.write_text(textwrap.dedent("""
        from msgspec import Struct
        from fluxlite.util.handlers import handler_table

        class Ev(Struct, frozen=True):
            pass

        class Went(Ev):
            pass

        class Came(Ev):
            pass

        class M:
            def _on_Went(self, ev):
                pass

            def _on_Cmae(self, ev):
                pass

        M.HANDLERS = handler_table(M, Ev, {Went: M._on_Went, Came: M._on_Cmae})
    """))
    spec = importlib.util.spec_from_file_location("broken_machine", src)
    module = importlib.util.module_from_spec(spec)
    with pytest.raises(TypeError, match="_on_Cmae handles Came: name it _on_Came"):
        spec.loader.exec_module(module)
