"""Groups of calls (zcollGroupStart / zcollGroupEnd) and non-blocking requests
(zcollGroupEndNonBlocking, zcollRequestTest / Wait / Free).

Inside ``with zcoll.core.group():`` every call is checked and queued; all run when the outermost
group ends. With ``nonblocking=True`` the group's calls (host arrays of one communicator) are
queued behind the communicator's earlier calls and the block's ``as`` target gets a
:class:`Request` once the block ends. The arrays a group's calls hold stay held (DLPack tensors
not released, buffers locked) until the group has run: until the request completes for a
non-blocking one.
"""
import ctypes
import threading

from . import _library

_state = threading.local()  # per thread, as zcoll's groups: depth and the views held


def _held():
    if not hasattr(_state, "depth"):
        _state.depth, _state.views = 0, []
    return _state


def in_group():
    return _held().depth > 0


def hold(views):
    """Keeps a queued call's views until the outermost group has run."""
    _held().views.extend(views)


def _release(views):
    for v in views:
        v.release()


class Request:
    """A non-blocking group's request: wait() blocks until its calls ran (raising their
    error), test() says whether they have; the arrays are released once complete."""

    def __init__(self, handle, views):
        self._handle = handle
        self._views = views
        self._result = None

    def test(self):
        """True once complete (raising the group's error, if it failed), else False."""
        if self._handle is None:
            return self._finish(None)
        done = ctypes.c_int()
        _library.check(_library.lib.zcollRequestTest(self._handle, ctypes.byref(done)),
                       what="the non-blocking group")
        if not done.value:
            return False
        return self._finish(0)

    def wait(self):
        """Blocks (GIL released, bounded by the communicator's timeout) until complete; raises
        the group's error if it failed."""
        if self._handle is not None:
            result = _library.lib.zcollRequestWait(self._handle)
            self._finish(result)
        return self._finish(None)

    def _finish(self, result):
        if self._handle is not None and result is not None:
            handle, self._handle = self._handle, None
            self._result = result
            _library.lib.zcollRequestFree(handle)
            _release(self._views)
            self._views = []
            if result:
                _library.check(result, what="the non-blocking group")
        elif self._result:
            _library.check(self._result, what="the non-blocking group")
        return True

    def __del__(self):
        handle, self._handle = getattr(self, "_handle", None), None
        if handle is not None:
            _library.lib.zcollRequestFree(handle)  # waits for it: buffers are in use until then
            _release(self._views)


class group:
    """``with zcoll.core.group(nonblocking=False) as g:`` -- g.request is the Request of a
    non-blocking group once the block has ended (None for a blocking one). If the block
    raises, the group is still ended (the calls queued so far run) and the error propagates."""

    def __init__(self, nonblocking=False):
        self.nonblocking = nonblocking
        self.request = None

    def __enter__(self):
        state = _held()
        _library.check(_library.lib.zcollGroupStart(), what="zcollGroupStart")
        state.depth += 1
        return self

    def __exit__(self, exc_type, exc, tb):
        state = _held()
        state.depth -= 1
        outermost = state.depth == 0
        views = state.views if outermost else []
        if outermost:
            state.views = []
        if self.nonblocking and outermost:
            handle = ctypes.c_void_p()
            result = _library.lib.zcollGroupEndNonBlocking(ctypes.byref(handle))
            if result == 0:
                self.request = Request(handle.value, views) if handle.value else \
                    Request(None, views)
                views = []
        else:
            result = _library.lib.zcollGroupEnd()
        _release(views)
        if exc_type is None:
            _library.check(result, what="zcollGroupEnd" if not self.nonblocking
                           else "zcollGroupEndNonBlocking")
        return False
