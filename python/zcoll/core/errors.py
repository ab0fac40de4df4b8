"""The exceptions of zcoll.core: their type says whose fault a failure is.

* :class:`ArgumentError` (a ``ValueError``) and :class:`BufferTypeError` (a ``TypeError``): the
  call's arguments are wrong (raised before anything is sent; nothing is written and the
  communicator stays usable). zcoll's own ``zcollInvalidArgument`` maps here too.
* :class:`UnsupportedError` (a ``ValueError``): a valid request this build or process cannot
  serve (``zcollUnsupported``), e.g. a CUDA array when libzcoll has no device support.
* :class:`UsageError` (a ``RuntimeError``): a call made at the wrong time or with peers that
  disagree (``zcollInvalidUsage``).
* :class:`CommError` (a ``RuntimeError``): a communication failure (a peer failed, an OS or
  CUDA call failed, a timeout: :class:`CommTimeout`, also a ``TimeoutError``).

Every one carries ``result`` (the zcollResult_t code, 0 when raised before any zcoll call) and
the message, which includes zcollGetLastError's text when zcoll failed.
"""

SUCCESS, SYSTEM_ERROR, INTERNAL_ERROR, INVALID_ARGUMENT, INVALID_USAGE = 0, 1, 2, 3, 4
REMOTE_ERROR, IN_PROGRESS, TIMEOUT, UNSUPPORTED, CUDA_ERROR = 5, 6, 7, 8, 9


class ZcollError(Exception):
    """Base class of every zcoll.core exception."""

    def __init__(self, message, result=0):
        super().__init__(message)
        self.result = result


class ArgumentError(ZcollError, ValueError):
    """A bad argument: size, count, rank, setting, read-only output, non-contiguous array."""


class BufferTypeError(ZcollError, TypeError):
    """An object that is not a usable array: no DLPack, CUDA Array Interface or buffer
    protocol, or a data type zcoll does not take."""


class UnsupportedError(ZcollError, ValueError):
    """A valid request this build or process cannot serve (zcollUnsupported)."""


class UsageError(ZcollError, RuntimeError):
    """A call made at the wrong time or with peers that disagree (zcollInvalidUsage)."""


class CommError(ZcollError, RuntimeError):
    """A communication failure: a peer failed, an OS or CUDA call failed, or a wait timed out."""


class CommTimeout(CommError, TimeoutError):
    """A wait exceeded the communicator's timeout (zcollTimeout)."""


_BY_RESULT = {
    INVALID_ARGUMENT: ArgumentError,
    INVALID_USAGE: UsageError,
    UNSUPPORTED: UnsupportedError,
    TIMEOUT: CommTimeout,
}


def error_for(result, message):
    """The exception for a zcollResult_t code that is not zcollSuccess."""
    return _BY_RESULT.get(result, CommError)(message, result)
