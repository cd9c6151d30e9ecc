"""jitgrad.save / jitgrad.load: weight files that never execute code when read.

A file is a fixed preamble, a JSON header and the raw bytes of every tensor::

    b"\\x93JITGRAD"  format version (uint32 LE)  header length (uint64 LE)  header CRC-32 (uint32 LE)
    header (UTF-8 JSON)  padding to 64 bytes, then each tensor's little-endian C-order bytes, each at a
    64-byte aligned offset

The header holds the object tree -- dicts (any hashable keys of the types below), lists, tuples,
strings, numbers, booleans, None and tensors -- and, per tensor, its dtype, shape, offset,
size and CRC-32. The header's own CRC-32 covers the version, the header length and the header,
so one flipped byte anywhere but in the padding is an error, never a silently renamed key.
Loading parses JSON and copies bytes into arrays of an allow-listed dtype. Every offset, size and
checksum is validated, so a truncated, corrupt or foreign file raises a
RuntimeError naming the file. Version 1 files (no header checksum) are still read.

Anything else -- a whole model, an optimizer, a dict holding them, any picklable object -- is pickled, as
``torch.save`` does: the tree is then ``{"t": "pickle", "i": n}``, tensor ``n`` (uint8) holding the pickle,
whose tensors are persistent ids into the same tensor table (a tensor shared by the model and the
optimizer's state is stored once and loads as one tensor). ``load`` unpickles it with PyTorch 2.6+'s
default ``weights_only=True``: a restricted unpickler (_weights_only_unpickler.py) that builds tensors,
containers and allowlisted globals only; ``weights_only=False`` is the explicit opt-in to full unpickling.
A file that is only a tree never unpickles, whatever ``weights_only`` says.

``save`` writes a temporary file in the target directory and renames it over the target, so a
failed or interrupted save leaves any old file intact. The temporary file's name holds the
writer's process id: one left behind by a writer that was killed is removed by the next save to
the same path.
"""
import collections
import io
import json
import numbers
import os
import pickle
import struct
import tempfile
import zlib

import numpy as np

from . import _dtype as D
from ._layout import LAZY
from . import _weights_only_unpickler as _wo
from ._weights_only_unpickler import add_safe_globals, clear_safe_globals, get_safe_globals, safe_globals  # noqa: F401
from ._tensor import Tensor
from .nn.parameter import Parameter

MAGIC = b"\x93JITGRAD"
VERSION = 2
_PREAMBLE = struct.Struct("<8sIQ")  # magic, format version, header length (the layout of every version)
_HEADER_CRC = struct.Struct("<I")  # from version 2 on: CRC-32 of the version, header length and header
MAX_NDIM = 64  # NumPy's limit
_TMP_SUFFIX = ".jgtmp"
DEFAULT_PROTOCOL = 2  # torch.save's pickle protocol
_ALIGN = 64
# dtype name in the file -> little-endian NumPy dtype; nothing else is ever read. bfloat16 (ml_dtypes', which has
# no byte orders) is stored as its bits, little-endian uint16, and viewed as bfloat16 when loaded (_BITS_OF).
_DTYPES = {"bool": np.dtype("|b1"), "uint8": np.dtype("|u1"), "int32": np.dtype("<i4"), "int64": np.dtype("<i8"),
           "float32": np.dtype("<f4"), "float64": np.dtype("<f8"), "float16": np.dtype("<f2"),
           "bfloat16": np.dtype("<u2"), "complex64": np.dtype("<c8"), "complex128": np.dtype("<c16")}
_BITS_OF = {"bfloat16": D.bfloat16.np}
_FLOATING = frozenset(("float16", "bfloat16", "float32", "float64"))
_DTYPE_NAMES = {v.newbyteorder("="): k for k, v in _DTYPES.items() if k not in _BITS_OF}
_DTYPE_NAMES.update({v: k for k, v in _BITS_OF.items()})
_SCALARS = (str, bool, int, float, type(None))


def _align(n):
    return -(-n // _ALIGN) * _ALIGN


# ---------------------------------------------------------------- save
class _Encoder:
    """Turns an object tree into a JSON-ready tree plus the list of arrays to write."""

    def __init__(self):
        self.arrays = []   # contiguous little-endian arrays, in file order
        self.tensors = []  # their header entries
        self._index = {}   # id(tensor) -> index: a tensor saved twice is stored once
        self._keep = []    # keeps saved tensors alive, so their ids stay unique while encoding
        self._active = set()

    def encode(self, obj, where="obj"):
        if isinstance(obj, Tensor):
            return {"t": "tensor", "i": self._tensor(obj, where)}
        if isinstance(obj, np.generic) and not isinstance(obj, (np.void, np.object_)):
            obj = obj.item()
        if isinstance(obj, _SCALARS):
            if isinstance(obj, bool):
                return bool(obj)
            if isinstance(obj, numbers.Integral):
                return int(obj)
            if isinstance(obj, float):
                return float(obj)
            return obj if obj is None else str(obj)
        if isinstance(obj, (dict, list, tuple)):
            if id(obj) in self._active:
                raise _NotATree("jitgrad.save: %s contains itself" % where)
            self._active.add(id(obj))
            try:
                return self._container(obj, where)
            finally:
                self._active.discard(id(obj))
        raise _NotATree("jitgrad.save can't save %s of type %s" % (where, type(obj).__qualname__))

    def _container(self, obj, where):
        if isinstance(obj, dict):
            tag = "counter" if isinstance(obj, collections.Counter) else \
                "odict" if isinstance(obj, collections.OrderedDict) else "dict"
            items = []
            for k, v in obj.items():
                key = self._key(k, where)
                items.append([key, self.encode(v, "%s[%r]" % (where, k))])
            return {"t": tag, "items": items}
        tag = "list" if isinstance(obj, list) else "tuple"
        return {"t": tag, "items": [self.encode(v, "%s[%d]" % (where, i)) for i, v in enumerate(obj)]}

    def _key(self, k, where):
        if isinstance(k, tuple):
            return {"t": "tuple", "items": [self._key(x, where) for x in k]}
        if isinstance(k, np.generic):
            k = k.item()
        if not isinstance(k, _SCALARS):
            raise _NotATree("jitgrad.save can't save a dict key of type %s in %s" % (type(k).__qualname__, where))
        return self.encode(k, where)

    def _tensor(self, t, where):
        i = self._index.get(id(t))
        if i is not None:
            return i
        if t.is_sparse or t.is_sparse_csr:
            raise NotImplementedError("jitgrad.save can't save %s: a tensor with layout %r (save its indices and values, "
                                      "or to_dense())" % (where, t.layout))
        data = t._data
        name = _DTYPE_NAMES.get(data.dtype.newbyteorder("="))
        if name is None:
            raise TypeError("jitgrad.save can't save %s: unsupported dtype %s" % (where, data.dtype))
        if name in _BITS_OF:
            data = np.asarray(t._host()).view(np.uint16)
        if data.__class__ in LAZY:  # (a lazy conjugate or negation: its values)
            data = data.resolved()
        arr = np.asarray(data, dtype=_DTYPES[name], order="C")
        i = self._index[id(t)] = self.add(arr, name, bool(t.requires_grad), isinstance(t, Parameter))
        self._keep.append(t)
        return i

    def add(self, arr, name, requires_grad=False, parameter=False):
        """Index of a new entry for contiguous array ``arr`` of file dtype ``name``."""
        entry = {"dtype": name, "shape": list(arr.shape), "nbytes": arr.nbytes,
                 "crc32": zlib.crc32(_bytes(arr)), "requires_grad": requires_grad}
        if parameter:
            entry["parameter"] = True
        self.arrays.append(arr)
        self.tensors.append(entry)
        return len(self.arrays) - 1


class _NotATree(Exception):
    """The object is not a tree of the types the header holds: save pickles it instead."""


class _Pickler(pickle.Pickler):
    """Pickles an object with its tensors as persistent ids: indices into the file's tensor table."""

    def __init__(self, f, protocol, encoder):
        super().__init__(f, protocol)
        self.encoder = encoder

    def persistent_id(self, obj):
        if isinstance(obj, Tensor):
            return self.encoder._tensor(obj, "a tensor")
        return None


def _bytes(arr):
    """The bytes of a contiguous array, without a copy."""
    return memoryview(arr.reshape(-1)).cast("B") if arr.size else b""


def _serialize(obj, protocol=DEFAULT_PROTOCOL):
    """(header bytes, arrays): everything is checked before any file is touched. A tree of containers,
    tensors and scalars goes in the header; anything else is pickled."""
    enc = _Encoder()
    try:
        tree = enc.encode(obj)
    except _NotATree as e:
        enc = _Encoder()
        buf = io.BytesIO()
        try:
            _Pickler(buf, protocol, enc).dump(obj)
        except (pickle.PicklingError, TypeError, AttributeError) as pe:
            raise TypeError("%s, and it can't be pickled (%s)" % (e, pe)) from pe
        tree = {"t": "pickle", "i": enc.add(np.frombuffer(buf.getbuffer(), np.uint8), "uint8")}
    offset = 0
    for entry in enc.tensors:
        entry["offset"] = offset
        offset = _align(offset + entry["nbytes"])
    header = {"format": "jitgrad", "tree": tree, "tensors": enc.tensors, "data_size": offset}
    return json.dumps(header, separators=(",", ":")).encode("utf-8"), enc.arrays, enc.tensors


def _header_crc(preamble, header):
    return zlib.crc32(header, zlib.crc32(preamble[len(MAGIC):]))


def _write(f, header, arrays, entries):
    preamble = _PREAMBLE.pack(MAGIC, VERSION, len(header))
    f.write(preamble)
    f.write(_HEADER_CRC.pack(_header_crc(preamble, header)))
    f.write(header)
    pos = _PREAMBLE.size + _HEADER_CRC.size + len(header)
    data_start = _align(pos)
    f.write(b"\0" * (data_start - pos))
    pos = 0
    for arr, entry in zip(arrays, entries):
        f.write(b"\0" * (entry["offset"] - pos))
        f.write(_bytes(arr))
        pos = entry["offset"] + entry["nbytes"]
    data_size = _align(pos) if entries else 0
    f.write(b"\0" * (data_size - pos))


def _file_mode(path):
    """Permissions for the new file: the old file's, else the usual default under the current umask."""
    try:
        return os.stat(path).st_mode & 0o7777
    except FileNotFoundError:
        umask = os.umask(0)
        os.umask(umask)
        return 0o666 & ~umask


def save(obj, f, pickle_module=None, pickle_protocol=DEFAULT_PROTOCOL, _use_new_zipfile_serialization=True,
         _disable_byteorder_record=False):
    """Save ``obj`` to ``f``: nested dicts, lists and tuples of tensors, numbers, strings, booleans and None
    (a state dict) as a checked tree that loads without unpickling; anything else (a model, an optimizer, a
    checkpoint dict holding them) pickled with its tensors stored beside the pickle, as torch.save does.

    ``f`` is a path (written atomically: a temporary file in the same directory, then renamed over
    ``f``) or a binary file object opened for writing.
    """
    if pickle_module is not None and pickle_module is not pickle:
        raise ValueError("jitgrad.save pickles with Python's pickle module only")
    header, arrays, entries = _serialize(obj, pickle_protocol)
    if hasattr(f, "write"):
        _write(f, header, arrays, entries)
        return
    path = os.fspath(f)
    directory = os.path.dirname(os.path.abspath(path))
    prefix = "." + os.path.basename(path) + "."
    _remove_stale_temporaries(directory, prefix)
    fd, tmp = tempfile.mkstemp(prefix="%s%d." % (prefix, os.getpid()), suffix=_TMP_SUFFIX, dir=directory)
    try:
        with os.fdopen(fd, "wb") as out:
            _write(out, header, arrays, entries)
            out.flush()
            os.fsync(out.fileno())
        os.chmod(tmp, _file_mode(path))
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise
    try:  # make the rename itself durable
        dir_fd = os.open(directory, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(dir_fd)
    except OSError:
        pass
    finally:
        os.close(dir_fd)


def _remove_stale_temporaries(directory, prefix):
    """Remove temporaries of earlier saves to this path whose writer process is gone (killed mid-save)."""
    try:
        names = os.listdir(directory)
    except OSError:
        return
    for name in names:
        if not (name.startswith(prefix) and name.endswith(_TMP_SUFFIX)):
            continue
        pid = name[len(prefix):].split(".", 1)[0]
        if pid.isdigit() and int(pid) != os.getpid() and not _process_alive(int(pid)):
            try:
                os.unlink(os.path.join(directory, name))
            except OSError:
                pass


def _process_alive(pid):
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:  # exists, but belongs to someone else
        return True
    return True


# ---------------------------------------------------------------- load
class _Corrupt(Exception):
    """Raised inside the reader; load() turns it into a RuntimeError naming the file."""


def _check(cond, what):
    if not cond:
        raise _Corrupt(what)


def _is_int(x):
    return isinstance(x, int) and not isinstance(x, bool) and x >= 0


def _foreign(head):
    if head.startswith(b"PK\x03\x04"):
        return "is a zip archive (PyTorch's torch.save format?), not a jitgrad file; jitgrad.load never unpickles"
    if head[:1] == b"\x80":
        return "is a pickle, not a jitgrad file; jitgrad.load never unpickles"
    return "is not a jitgrad file (bad magic header)"


class _Reader:
    def __init__(self, f, size, weights_only=True, location=None, unpickle=_wo.load):
        self.f, self.size, self.base = f, size, f.tell()  # a file object may hold the data after other bytes
        self.weights_only, self.location, self.unpickle = weights_only, location, unpickle

    def read(self):
        head = self.f.read(_PREAMBLE.size)
        _check(head, "is empty")
        if len(head) < _PREAMBLE.size or not head.startswith(MAGIC):
            if len(head) < _PREAMBLE.size and MAGIC.startswith(head[:len(MAGIC)]):
                raise _Corrupt("is truncated (%d bytes)" % len(head))
            raise _Corrupt(_foreign(head))
        _, version, header_len = _PREAMBLE.unpack(head)
        _check(version in (1, VERSION), "has format version %d; this jitgrad reads versions 1 to %d"
               % (version, VERSION))
        start = _PREAMBLE.size + (_HEADER_CRC.size if version >= 2 else 0)
        _check(start + header_len <= self.size, "is truncated (header runs past the end of the file)")
        crc = _HEADER_CRC.unpack(self.f.read(_HEADER_CRC.size))[0] if version >= 2 else None
        raw = self.f.read(header_len)
        _check(crc is None or _header_crc(head, raw) == crc, "is corrupt (header checksum mismatch)")
        try:
            header = json.loads(raw.decode("utf-8"))
        except (ValueError, RecursionError) as e:
            raise _Corrupt("has a corrupt header (%s)" % e) from None
        _check(isinstance(header, dict) and header.get("format") == "jitgrad", "has a corrupt header")
        tensors, data_size = header.get("tensors"), header.get("data_size")
        _check(isinstance(tensors, list) and _is_int(data_size), "has a corrupt header")
        data_start = _align(start + header_len)
        _check(data_start + data_size <= self.size, "is truncated (expected %d bytes, found %d)"
               % (data_start + data_size, self.size))
        _check(data_start + data_size == self.size, "has %d unexpected bytes at its end"
               % (self.size - data_start - data_size))
        self.entries = [self._entry(e, data_size) for e in tensors]
        self.data_start = data_start
        self.loaded = {}
        try:
            return self._decode(header.get("tree"))
        except RecursionError:
            raise _Corrupt("has a corrupt header (nested too deeply)") from None

    @staticmethod
    def _entry(e, data_size):
        _check(isinstance(e, dict), "has a corrupt tensor entry")
        name = e.get("dtype")
        dtype = _DTYPES.get(name) if isinstance(name, str) else None
        _check(dtype is not None, "has a tensor of unknown dtype %r" % (name,))
        shape, offset, nbytes = e.get("shape"), e.get("offset"), e.get("nbytes")
        _check(isinstance(shape, list) and all(_is_int(s) for s in shape), "has a tensor with a corrupt shape")
        _check(len(shape) <= MAX_NDIM, "has a tensor with %d dimensions (at most %d are supported)"
               % (len(shape), MAX_NDIM))
        _check(all(s < 1 << 63 for s in shape) and int(np.prod(shape, dtype=object)) < 1 << 63,
               "has a tensor with an impossible shape %s" % shape)
        _check(_is_int(offset) and _is_int(nbytes) and _is_int(e.get("crc32")), "has a corrupt tensor entry")
        _check(nbytes == int(np.prod(shape, dtype=object)) * dtype.itemsize,
               "has a tensor whose size does not match its shape %s" % shape)
        _check(offset + nbytes <= data_size, "has a tensor that points outside the file")
        _check(isinstance(e.get("requires_grad"), bool), "has a corrupt tensor entry")
        _check(not e["requires_grad"] or name in _FLOATING, "has an integer tensor that requires grad")
        return (dtype, tuple(shape), offset, nbytes, e["crc32"], e["requires_grad"], e.get("parameter") is True,
                _BITS_OF.get(name))

    def _tensor(self, i):
        _check(_is_int(i) and i < len(self.entries), "refers to a tensor that is not in the file")
        if i in self.loaded:
            return self.loaded[i]
        arr, requires_grad, parameter = self._array(i)
        t = Tensor._wrap(arr)
        if self.location is not None:
            t = self.location(t)
        t = Parameter(t, requires_grad=requires_grad) if parameter else t.requires_grad_(requires_grad)
        self.loaded[i] = t
        return t

    def _array(self, i):
        """Entry ``i``'s array (read and checked), whether it requires grad and whether it is a Parameter."""
        dtype, shape, offset, nbytes, crc, requires_grad, parameter, bits_of = self.entries[i]
        try:
            arr = np.empty(shape, dtype=dtype)
        except (ValueError, MemoryError) as e:  # a shape NumPy refuses (each dimension fits, their product may not)
            raise _Corrupt("has a tensor of shape %s that cannot be created (%s)" % (list(shape), e)) from None
        if nbytes:
            self.f.seek(self.base + self.data_start + offset)
            got = self.f.readinto(_bytes(arr))
            _check(got == nbytes, "is truncated")
        _check(zlib.crc32(_bytes(arr)) == crc, "is corrupt (checksum mismatch in tensor %d)" % i)
        if dtype == np.bool_:
            _check(bool((arr.view(np.uint8) <= 1).all()), "is corrupt (invalid boolean values)")
        arr = arr.astype(dtype.newbyteorder("="), copy=False)
        if bits_of is not None:
            arr = arr.view(bits_of)
        return arr, requires_grad, parameter

    def _unpickle(self, i):
        _check(_is_int(i) and i < len(self.entries) and self.entries[i][0] == np.uint8 and
               len(self.entries[i][1]) == 1, "has a corrupt pickle entry")
        data = self._array(i)[0].tobytes()
        return self.unpickle(data, self._tensor, self.weights_only)

    def _decode(self, node):
        if node is None or isinstance(node, (str, bool, int, float)):
            return node
        _check(isinstance(node, dict) and isinstance(node.get("items", []), list), "has a corrupt object tree")
        tag, items = node.get("t"), node.get("items", [])
        if tag == "tensor":
            return self._tensor(node.get("i"))
        if tag == "pickle":
            return self._unpickle(node.get("i"))
        if tag in ("list", "tuple"):
            values = [self._decode(v) for v in items]
            return values if tag == "list" else tuple(values)
        if tag in ("dict", "odict", "counter"):
            out = {"dict": dict, "odict": collections.OrderedDict, "counter": collections.Counter}[tag]()
            for item in items:
                _check(isinstance(item, list) and len(item) == 2, "has a corrupt object tree")
                key = self._decode(item[0])
                _check(isinstance(key, (str, bool, int, float, tuple, type(None))), "has an invalid dict key")
                try:
                    out[key] = self._decode(item[1])
                except TypeError:  # a tuple key holding something unhashable
                    raise _Corrupt("has an invalid dict key") from None
            return out
        raise _Corrupt("has an unknown object tag %r" % (tag,))


def load(f, map_location=None, pickle_module=None, *, weights_only=None, mmap=None, **pickle_load_args):
    """Load an object saved with :func:`save` from a path or a binary file object.

    A state dict (a tree of containers, tensors and scalars) loads without unpickling. A pickled object
    loads, by default (``weights_only=True``, as PyTorch 2.6+), with a restricted unpickler that builds
    tensors, containers and the globals marked safe (``add_safe_globals``, ``safe_globals``) and raises
    PyTorch's ``UnpicklingError`` for anything else; ``weights_only=False`` unpickles anything (only for
    files from a trusted source). ``map_location`` (a device, a string, a dict from location to location,
    or a function ``(tensor, location) -> tensor``) places the loaded tensors; every tensor is read to
    the CPU, its location "cpu".
    """
    if weights_only is None:
        weights_only = True
    if weights_only and pickle_module is not None:
        raise RuntimeError("Can not safely load weights when explicit pickle_module is specified")
    return _read(f, weights_only=weights_only, location=_location(map_location))


def _read(f, **reader_args):
    if hasattr(f, "read"):
        name = getattr(f, "name", None) or repr(f)
        if not f.seekable():
            raise RuntimeError("jitgrad.load: %r is not seekable" % (name,))
        start = f.tell()
        f.seek(0, os.SEEK_END)
        size = f.tell() - start
        f.seek(start)
        return _load_from(f, size, name, reader_args)
    path = os.fspath(f)
    name = path
    with open(path, "rb") as fh:
            return _load_from(fh, os.fstat(fh.fileno()).st_size, name, reader_args)


def _load_from(f, size, name, reader_args):
    try:
        return _Reader(f, size, **reader_args).read()
    except _Corrupt as e:
        raise RuntimeError("jitgrad.load: %r %s" % (name, e)) from None


def _location(map_location):
    """map_location as a function of a loaded (CPU) tensor, or None."""
    if map_location is None:
        return None
    if callable(map_location):
        return lambda t: _moved(t, map_location(t, "cpu"))
    if isinstance(map_location, dict):
        to = map_location.get("cpu")
        return None if to is None else lambda t: t.to(to)
    return lambda t: t.to(map_location)


def _moved(t, result):
    return t if result is None else result


def get_unsafe_globals_in_checkpoint(f):
    """The globals a pickled object in file ``f`` names that a ``weights_only=True`` load would refuse
    (read without unpickling; a state dict has none)."""
    seen = []
    _read(f, unpickle=lambda data, persistent_load, weights_only: seen.extend(_wo.unsafe_globals_in(data)))
    return sorted(set(seen))
