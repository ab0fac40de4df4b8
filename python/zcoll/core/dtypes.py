"""zcoll's data types and how each array protocol spells them.

DLPack codes are decoded here, not by a framework: NumPy has no bfloat16, yet a bfloat16 tensor
(DLPack code kDLBfloat = 4, 16 bits) must reach zcollBfloat16. Values are zcollDataType_t.
"""
import struct

INT8, UINT8, INT32, UINT32, INT64, UINT64 = 0, 1, 2, 3, 4, 5
FLOAT16, FLOAT32, FLOAT64, BFLOAT16 = 6, 7, 8, 9

NAMES = {INT8: "int8", UINT8: "uint8", INT32: "int32", UINT32: "uint32", INT64: "int64",
         UINT64: "uint64", FLOAT16: "float16", FLOAT32: "float32", FLOAT64: "float64",
         BFLOAT16: "bfloat16"}
BY_NAME = {name: code for code, name in NAMES.items()}
ITEMSIZE = {INT8: 1, UINT8: 1, INT32: 4, UINT32: 4, INT64: 8, UINT64: 8, FLOAT16: 2,
            FLOAT32: 4, FLOAT64: 8, BFLOAT16: 2}
FLOATING = (FLOAT16, FLOAT32, FLOAT64, BFLOAT16)

# DLPack's DLDataTypeCode: kDLInt 0, kDLUInt 1, kDLFloat 2, kDLBfloat 4.
_DLPACK = {(0, 8): INT8, (1, 8): UINT8, (0, 32): INT32, (1, 32): UINT32, (0, 64): INT64,
           (1, 64): UINT64, (2, 16): FLOAT16, (2, 32): FLOAT32, (2, 64): FLOAT64,
           (4, 16): BFLOAT16}
# DLPack codes -> the same type in NumPy's typestr letters (for DLPack export of empty()).
DLPACK_CODE = {dtype: key for key, dtype in _DLPACK.items()}
_DLPACK_KIND = {0: "int", 1: "uint", 2: "float", 3: "opaque handle", 4: "bfloat", 5: "complex",
                6: "bool"}


def from_dlpack(code, bits):
    """zcollDataType_t of a DLPack (code, bits), or None when zcoll does not take it."""
    return _DLPACK.get((code, bits))


def describe_dlpack(code, bits):
    return f"{_DLPACK_KIND.get(code, f'code {code}')}{bits}"


# NumPy array-interface typestr (CUDA Array Interface): kind letter + item size.
_TYPESTR = {("i", 1): INT8, ("u", 1): UINT8, ("i", 4): INT32, ("u", 4): UINT32, ("i", 8): INT64,
            ("u", 8): UINT64, ("f", 2): FLOAT16, ("f", 4): FLOAT32, ("f", 8): FLOAT64}
_LITTLE = struct.pack("=H", 1) == b"\x01\x00"


def from_typestr(typestr):
    """zcollDataType_t of an array-interface typestr ("<f4", "|u1"), or None. Byte order
    must be the machine's (or not apply: "|")."""
    if len(typestr) < 3:
        return None
    order, kind, size = typestr[0], typestr[1], typestr[2:]
    if order not in ("|", "=", "<" if _LITTLE else ">") or not size.isdigit():
        return None
    return _TYPESTR.get((kind, int(size)))


# struct-module format letters (buffer protocol) -> signed / unsigned / float.
_FORMAT_KIND = {"b": "i", "h": "i", "i": "i", "l": "i", "q": "i", "n": "i",
                "B": "u", "H": "u", "I": "u", "L": "u", "Q": "u", "N": "u",
                "e": "f", "f": "f", "d": "f", "c": "u"}


def from_format(fmt, itemsize):
    """zcollDataType_t of a buffer's struct format ("f", "<i", "B") and item size, or None.
    Standard-size prefixes ("<", "=", "!") other than the native order are refused."""
    if fmt and fmt[0] in "@=<>!":
        prefix, fmt = fmt[0], fmt[1:]
        if prefix in ">!" if _LITTLE else prefix == "<":
            return None
    kind = _FORMAT_KIND.get(fmt)
    return _TYPESTR.get((kind, itemsize)) if kind else None


def parse(dtype):
    """zcollDataType_t of a dtype given by name ("bfloat16"), by code, or as any object whose
    str() is such a name (numpy.float32, numpy.dtype("float16"), torch.bfloat16)."""
    if isinstance(dtype, int) and not isinstance(dtype, bool) and dtype in NAMES:
        return dtype
    name = getattr(dtype, "__name__", None) or str(dtype)
    name = name.rsplit(".", 1)[-1]  # torch.bfloat16 -> bfloat16
    if name in BY_NAME:
        return BY_NAME[name]
    from .errors import BufferTypeError
    raise BufferTypeError(f"zcoll.core: dtype {dtype!r} is not one zcoll takes "
                          f"({', '.join(BY_NAME)})")
