"""Communicator: a zcollComm_t's lifecycle (init, from_env, split, shrink, abort, destroy) and
the plumbing every collective goes through (collectives.py holds the calls themselves)."""
import ctypes

from . import _library, groups
from .collectives import Collectives
from .config import config_pointer
from .errors import ArgumentError

UNIQUE_ID_BYTES = 128


def get_unique_id():
    """A new unique id (128 bytes) for :meth:`Communicator.init`: made on one rank (it starts
    the rendezvous service there) and handed to the others out of band."""
    uid = _library.UniqueIdStruct()
    _library.check(_library.lib.zcollGetUniqueId(ctypes.byref(uid)), what="zcollGetUniqueId")
    return bytes(uid)  # all 128 bytes (the char array's .internal would stop at a NUL)


def _int_query(handle, function, what):
    value = ctypes.c_int()
    _library.check(function(handle, ctypes.byref(value)), handle, what)
    return value.value


class Communicator(Collectives):
    """One rank's zcoll communicator. Collectives are methods named after the C calls
    (``all_gather(x, out)``: send first, receive second); each blocks with the GIL released
    (host arrays), or is enqueued on `stream` (CUDA arrays). A context manager: destroyed at
    the end of the ``with`` block."""

    def __init__(self, handle):
        if not handle:
            raise ArgumentError("zcoll.core.Communicator: use Communicator.init or from_env")
        self._handle = handle

    # ---- creation ---------------------------------------------------------------------------

    @classmethod
    def init(cls, nranks, rank, unique_id, config=None):
        """Collective over `nranks` processes presenting the same `unique_id` (from
        :func:`get_unique_id`), each with its own `rank` in [0, nranks) (zcollCommInitRankConfig).
        config: a :class:`zcoll.core.Config`, a dict of its fields, or None."""
        for name, value in (("nranks", nranks), ("rank", rank)):
            if not isinstance(value, int) or isinstance(value, bool):
                raise ArgumentError(f"zcoll.core.Communicator.init: {name} must be an int, "
                                    f"got {value!r}")
        if not isinstance(unique_id, (bytes, bytearray)) or len(unique_id) != UNIQUE_ID_BYTES:
            raise ArgumentError(f"zcoll.core.Communicator.init: unique_id must be the "
                                f"{UNIQUE_ID_BYTES} bytes get_unique_id() returns")
        uid = _library.UniqueIdStruct()
        ctypes.memmove(ctypes.addressof(uid), bytes(unique_id), UNIQUE_ID_BYTES)
        pointer, _keep = config_pointer(config)
        handle = _library.c_comm()
        _library.check(_library.lib.zcollCommInitRankConfig(ctypes.byref(handle), nranks, uid,
                                                            rank, pointer),
                       what="zcollCommInitRankConfig")
        return cls(handle.value)

    @classmethod
    def from_env(cls, config=None):
        """Rank, size and rendezvous from the environment, as zcollCommInitFromEnv reads it
        (RANK / WORLD_SIZE and ZCOLL_COMM_ID or MASTER_ADDR / MASTER_PORT, as tools/zcollrun
        and torchrun set them; Open MPI, PMI and Slurm variables too)."""
        pointer, _keep = config_pointer(config)
        handle = _library.c_comm()
        _library.check(_library.lib.zcollCommInitFromEnv(ctypes.byref(handle), pointer),
                       what="zcollCommInitFromEnv")
        return cls(handle.value)

    def split(self, color, key=0, config=None):
        """Collective: ranks with equal `color` form a new communicator ordered by `key`; a
        negative color takes no part and gets None (zcollCommSplit)."""
        pointer, _keep = config_pointer(config)
        handle = _library.c_comm()
        _library.check(_library.lib.zcollCommSplit(self.handle, color, key, ctypes.byref(handle),
                                                   pointer), self.handle, "zcollCommSplit")
        return Communicator(handle.value) if handle.value else None

    def shrink(self, excluded, config=None, abort=False):
        """Collective over the ranks not in `excluded`: a communicator without them (ranks
        renumbered in order), or None on an excluded rank. abort=True for a broken parent
        (ZCOLL_SHRINK_ABORT: revokes it first). See zcollCommShrink."""
        excluded = list(excluded)
        ranks = (ctypes.c_int * max(len(excluded), 1))(*excluded)
        pointer, _keep = config_pointer(config)
        handle = _library.c_comm()
        _library.check(_library.lib.zcollCommShrink(self.handle, ranks, len(excluded),
                                                    ctypes.byref(handle), pointer, int(abort)),
                       self.handle, "zcollCommShrink")
        return Communicator(handle.value) if handle.value else None

    # ---- end of life ------------------------------------------------------------------------

    def revoke(self):
        """Puts the communicator in the error state on purpose, for a shrink
        (zcollCommRevoke)."""
        _library.check(_library.lib.zcollCommRevoke(self.handle), self.handle, "zcollCommRevoke")

    def abort(self):
        """Fails any call running on it (in another thread) and frees it (zcollCommAbort)."""
        handle, self._handle = self._handle, None
        if handle:
            _library.check(_library.lib.zcollCommAbort(handle), None, "zcollCommAbort")

    def destroy(self):
        """Frees the communicator (zcollCommDestroy); queued calls run first. Idempotent."""
        handle, self._handle = self._handle, None
        if handle:
            _library.check(_library.lib.zcollCommDestroy(handle), None, "zcollCommDestroy")

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.destroy()
        return False

    def __del__(self):
        handle, self._handle = getattr(self, "_handle", None), None
        if handle and _library.lib is not None:
            _library.lib.zcollCommDestroy(handle)

    # ---- queries ----------------------------------------------------------------------------

    @property
    def handle(self):
        """The zcollComm_t as an int (for C code and XLA FFI handlers sharing this libzcoll);
        stable for the communicator's life."""
        if not self._handle:
            raise ArgumentError("zcoll.core.Communicator: destroyed or aborted")
        return self._handle

    rank = property(lambda self: _int_query(self.handle, _library.lib.zcollCommUserRank,
                                            "zcollCommUserRank"), doc="This rank.")
    size = property(lambda self: _int_query(self.handle, _library.lib.zcollCommCount,
                                            "zcollCommCount"), doc="The number of ranks.")
    node_count = property(lambda self: _int_query(self.handle, _library.lib.zcollCommNodeCount,
                                                  "zcollCommNodeCount"))
    node_rank = property(lambda self: _int_query(self.handle, _library.lib.zcollCommNodeRank,
                                                 "zcollCommNodeRank"))
    local_rank = property(lambda self: _int_query(self.handle, _library.lib.zcollCommLocalRank,
                                                  "zcollCommLocalRank"))
    local_size = property(lambda self: _int_query(self.handle, _library.lib.zcollCommLocalSize,
                                                  "zcollCommLocalSize"))

    def group(self, nonblocking=False):
        """``with comm.group(nonblocking=True) as g: ...``; g.request.wait(): see
        :class:`zcoll.core.group` (groups are per thread and may span communicators)."""
        return groups.group(nonblocking)

    def __repr__(self):
        if not self._handle:
            return "zcoll.core.Communicator(destroyed)"
        return f"zcoll.core.Communicator(rank={self.rank}, size={self.size})"

    # ---- the plumbing of every call ---------------------------------------------------------

    def _call(self, what, function, arguments, views):
        """Runs function(*arguments) (the GIL released by ctypes) and raises its error; the
        views are released after it, or after the group it is queued in has run."""
        try:
            result = function(*arguments)
        except BaseException:
            _release(views)
            raise
        if groups.in_group() and result == 0:
            groups.hold(views)
        else:
            _release(views)
        _library.check(result, self.handle, what)


def _release(views):
    for v in views:
        v.release()
