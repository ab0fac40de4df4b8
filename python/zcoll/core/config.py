"""The growable settings structs zcoll takes: zcollConfig_t (a communicator's) and
zcollQuantConfig_t (a ZeRO++ call's), filled from Python keyword arguments."""
import ctypes
from dataclasses import dataclass
from typing import Optional

from .errors import ArgumentError

VERSION_CODE = 100  # ZCOLL_VERSION_CODE of the header these layouts follow (0.1.0)
_CONFIG_MAGIC, _QUANT_MAGIC = 0x7A636667, 0x7A717566
_UNDEF_INT = -2147483648


class ConfigStruct(ctypes.Structure):
    _fields_ = [("size", ctypes.c_size_t), ("magic", ctypes.c_uint), ("version", ctypes.c_uint),
                ("timeoutSec", ctypes.c_int), ("hostId", ctypes.c_char_p),
                ("commName", ctypes.c_char_p)]


class QuantConfigStruct(ctypes.Structure):
    _fields_ = [("size", ctypes.c_size_t), ("magic", ctypes.c_uint), ("version", ctypes.c_uint),
                ("bits", ctypes.c_int), ("intraBits", ctypes.c_int), ("blockSize", ctypes.c_int),
                ("mode", ctypes.c_int), ("rounding", ctypes.c_int),
                ("seed", ctypes.c_ulonglong), ("pipelineDepth", ctypes.c_int)]


@dataclass
class Config:
    """A communicator's settings (zcollConfig_t); None leaves zcoll's default.

    timeout: seconds any wait may last (default ZCOLL_TIMEOUT, 300);
    host_id: ranks with equal host_id form one node (default ZCOLL_HOSTID, else the machine);
    name: the name in log lines, zcoll_info --status and flight records."""
    timeout: Optional[int] = None
    host_id: Optional[str] = None
    name: Optional[str] = None

    def struct(self):
        if self.timeout is not None and (not isinstance(self.timeout, int) or
                                         not 1 <= self.timeout <= 2**31 - 1):
            raise ArgumentError(f"zcoll.core.Config: timeout must be whole seconds in "
                                f"[1, 2^31-1], got {self.timeout!r}")
        return ConfigStruct(
            ctypes.sizeof(ConfigStruct), _CONFIG_MAGIC, VERSION_CODE,
            _UNDEF_INT if self.timeout is None else self.timeout,
            None if self.host_id is None else str(self.host_id).encode(),
            None if self.name is None else str(self.name).encode())


def config_pointer(config):
    """(pointer for the C call, struct kept alive by the caller) of None, a Config or a dict."""
    if config is None:
        return None, None
    if isinstance(config, dict):
        config = Config(**config)
    if not isinstance(config, Config):
        raise ArgumentError(f"zcoll.core: config must be a zcoll.core.Config, a dict or None, "
                            f"got {type(config).__name__}")
    struct = config.struct()
    return ctypes.byref(struct), struct


def _count(name, value, limit=2**31 - 1):
    if value is None:
        return 0
    if not isinstance(value, int) or isinstance(value, bool) or not 0 <= value <= limit:
        raise ArgumentError(f"zcoll.core: {name} must be an int in [0, {limit}] or None, got "
                            f"{value!r}")
    return value


def quant_struct(bits=None, intra_bits=None, block_size=None, symmetric=True, stochastic=False,
                 seed=0, pipeline_depth=None):
    """zcollQuantConfig_t of the keyword arguments the ZeRO++ methods take; None (or 0) leaves
    the collective's documented default, and zcoll checks the values (ArgumentError)."""
    seed = _count("seed", seed, 2**64 - 1)
    return QuantConfigStruct(
        ctypes.sizeof(QuantConfigStruct), _QUANT_MAGIC, VERSION_CODE, _count("bits", bits),
        _count("intra_bits", intra_bits), _count("block_size", block_size),
        0 if symmetric else 1, 1 if stochastic else 0, seed,
        _count("pipeline_depth", pipeline_depth))
