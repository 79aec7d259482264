"""`flux.core.watchers`: timer, signal, fd and message watchers on a Flux
handle's reactor.  A started watcher is held by its handle (a watcher nobody
references keeps running, as in Flux); `with w:` starts it and stops it after."""

from __future__ import annotations

import fnmatch
import os
import signal as _signal
import time

from fluxlite.errors import UsageError

from ..constants import FLUX_MSGTYPE_ANY, FLUX_POLLIN


class Watcher:
    def __init__(self, flux_handle, callback, args=None):
        self.flux_handle, self.callback, self.args = flux_handle, callback, args
        self.active = False
        self.daemon = False     # True: does not keep reactor_run running by itself

    def start(self):
        if not self.active:
            self.active = True
            self.flux_handle._watchers.add(self)
            self._start()
        return self

    def stop(self):
        if self.active:
            self.active = False
            self.flux_handle._watchers.discard(self)
            self._stop()
        return self

    def destroy(self):
        self.stop()

    def _start(self):
        pass

    def _stop(self):
        pass

    def __enter__(self):
        return self.start()

    def __exit__(self, *exc):
        self.stop()
        return False


class TimerWatcher(Watcher):
    """callback(handle, watcher, revents, args) after `after` seconds, then every
    `repeat` seconds if repeat > 0."""

    def __init__(self, flux_handle, after, callback, repeat=0.0, args=None):
        if after < 0 or repeat < 0:
            raise UsageError(f"timer_watcher_create: after={after}, repeat={repeat}: "
                                "a timer's times cannot be negative")
        super().__init__(flux_handle, callback, args)
        self.after, self.repeat, self.due = float(after), float(repeat), None

    def _start(self):
        self.due = time.monotonic() + self.after

    def fire(self):
        if self.repeat > 0:
            self.due = time.monotonic() + self.repeat
        else:
            self.stop()
        self.callback(self.flux_handle, self, 0, self.args)


class SignalWatcher(Watcher):
    """callback(handle, watcher, signum, args) each time the process gets `signum`."""

    def __init__(self, flux_handle, signum, callback, args=None):
        if not isinstance(signum, int) or not 0 < signum < _signal.NSIG:
            raise UsageError(f"signal_watcher_create: {signum} is not a signal number "
                                f"(1..{_signal.NSIG - 1})")
        super().__init__(flux_handle, callback, args)
        self.signum, self._old, self._pipe = signum, None, None

    def _start(self):
        self._pipe = os.pipe()
        os.set_blocking(self._pipe[0], False)
        os.set_blocking(self._pipe[1], False)
        wfd = self._pipe[1]

        def on_signal(signum, frame):
            try:
                os.write(wfd, b"s")
            except OSError:
                pass

        self._old = _signal.signal(self.signum, on_signal)
        self.flux_handle.handle.add_fd(self._pipe[0], self._on_pipe)

    def _on_pipe(self):
        try:
            n = len(os.read(self._pipe[0], 4096))
        except BlockingIOError:
            return
        for _ in range(n):
            if self.active:
                self.callback(self.flux_handle, self, self.signum, self.args)

    def _stop(self):
        self.flux_handle.handle.remove_fd(self._pipe[0])
        _signal.signal(self.signum, self._old if self._old is not None else _signal.SIG_DFL)
        for fd in self._pipe:
            os.close(fd)
        self._pipe = None


class FDWatcher(Watcher):
    """callback(handle, watcher, fd, revents, args) while `fd` is readable."""

    def __init__(self, flux_handle, fd, events, callback, args=None):
        super().__init__(flux_handle, callback, args)
        self.fd, self.events = fd, FLUX_POLLIN if events is None else events

    def _start(self):
        self.flux_handle.handle.add_fd(self.fd, self._ready)

    def _ready(self):
        self.callback(self.flux_handle, self, self.fd, FLUX_POLLIN, self.args)

    def _stop(self):
        self.flux_handle.handle.remove_fd(self.fd)


class MessageWatcher(Watcher):
    """callback(handle, type, message, args) for each message of `type_mask` whose
    topic matches `topic_glob` (requests to a registered service, subscribed
    events)."""

    def __init__(self, flux_handle, type_mask, callback, topic_glob="*", args=None,
                 match_tag=None, rolemask=None):
        super().__init__(flux_handle, callback, args)
        if isinstance(topic_glob, bytes):
            topic_glob = topic_glob.decode()
        self.type_mask = FLUX_MSGTYPE_ANY if type_mask is None else type_mask
        self.topic_glob = topic_glob or "*"

    def matches(self, message) -> bool:
        return bool(message.type & self.type_mask) and \
            fnmatch.fnmatchcase(message.topic, self.topic_glob)
