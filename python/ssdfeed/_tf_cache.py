"""ssdfeed.tf.cache(): a tf.data pipeline's elements kept in ssdfeed cache
entries, in place of ``ds.cache(filename)``.

How elements are kept. A pipeline's length is usually unknown
(``TFRecordDataset``) while an entry needs its item count when it is made,
so the elements go into a C++ ItemStream (ssdfeed/items.h, identity
"tf1 key=KEY spec=DIGEST"): element i is item i % P of "part" entry i // P
(P elements a part), and a one-item "meta" entry records the element count
once the upstream has ended (docs/cache-format.md, "Items"). A pass over
a complete cache (meta present, every element stored) never touches the
upstream and reads elements by index on tf.data's parallel map; any other
pass reads what is stored in order and takes the rest from the upstream,
storing it (the fill, and its resume).

Each element is flattened into its component tensors
(``tf.nest.flatten(expand_composites=True)``: ragged flat values and row
splits, sparse indices/values/shape) and each component becomes one field:
numbers as a .npy array, strings as one bytes field (shape, lengths, data).
"""

from __future__ import annotations

import hashlib
import itertools
import math
import re
import struct
import threading
import warnings

import numpy as np
import tensorflow as tf

from ssdfeed import _ssdfeed
from ssdfeed._item_tree import KIND_ARRAY, KIND_BYTES, ItemFormatError
from ssdfeed._items import array_payload
from ssdfeed._tf_malloc import undo_tf_malloc_patch

ARRAY, BYTES = KIND_ARRAY, KIND_BYTES
_PART = 65536  # elements per part entry (part of the identity): ImageNet is 20 entries
_INDEX_CHUNK = 1024  # indices handed to the read map at a time
_NO_U8, _NO_FLOATS = np.zeros(0, np.uint8), np.zeros(0, np.float32)  # _read_np's unused outputs


# ------------------------------------------------------------- element codec
def component_specs(element_spec):
    """The dense component TensorSpecs an element flattens into."""
    specs = tf.nest.flatten(element_spec, expand_composites=True)
    for j, s in enumerate(specs):
        if s.dtype != tf.string and np.dtype(s.dtype.as_numpy_dtype).kind not in "biufc":
            raise TypeError(f"ssdfeed.tf.cache: component {j} of the element ({s}): dtype "
                            f"{s.dtype.name} is not supported (numbers, bool and strings are); "
                            f"element_spec: {element_spec}")
    return specs


def _strings(a: np.ndarray) -> bytes:
    # ndim, dims, then each string's length, then the strings back to back.
    flat = [x if isinstance(x, bytes) else bytes(x) for x in a.reshape(-1)]
    head = struct.pack(f"<I{a.ndim}q", a.ndim, *a.shape)
    lengths = np.fromiter((len(x) for x in flat), dtype="<i8", count=len(flat))
    return head + lengths.tobytes() + b"".join(flat)


def _unstrings(data: bytes, where: str) -> np.ndarray:
    """_strings' inverse; ItemFormatError unless data is exactly that."""
    if len(data) < 4:
        _bad(where, "a string field shorter than its 4-byte rank")
    (ndim,) = struct.unpack_from("<I", data)
    if ndim > 32 or len(data) < 4 + 8 * ndim:
        _bad(where, f"a string field of rank {ndim} does not hold its dims")
    shape = struct.unpack_from(f"<{ndim}q", data, 4)
    off = 4 + 8 * ndim
    if any(d < 0 for d in shape) or math.prod(shape) > (len(data) - off) // 8:
        _bad(where, f"string dims {list(shape)} do not fit the field's {len(data)} bytes")
    n = math.prod(shape)
    lengths = np.frombuffer(data, dtype="<i8", count=n, offset=off)
    off += 8 * n
    if n and (lengths.min() < 0 or int(lengths.sum()) != len(data) - off):
        _bad(where, "string lengths do not add up to the field's bytes")
    out = np.empty(n, dtype=object)
    for k, ln in enumerate(lengths.tolist()):
        out[k] = data[off:off + ln]
        off += ln
    return out.reshape(shape)


# float32 components that are a uint8 k as float (k or k/255: a decoded image
# after cast, or cast/255, the usual parse) are stored as k: 4x smaller, and
# read back as k / 255 by numpy's float32 division. Checked bit for bit when
# stored (tf's own division may round differently: then, or for anything
# else, the floats are stored as they are).
_SCALES = {"u8/255": np.float32(255), "u8": np.float32(1)}


def _as_u8(a: np.ndarray):
    """(tag, k) when a is k / scale for a uint8 k, bit for bit; else None."""
    if a.dtype != np.float32 or a.size < 64:
        return None
    for tag, scale in _SCALES.items():
        s = a * scale
        if not (np.all(s >= 0) and np.all(s <= 255)):  # NaN fails too
            continue
        k = np.rint(s).astype(np.uint8)
        if np.array_equal(_from_u8(k, scale).view(np.uint32), a.view(np.uint32)):
            return tag, k
    return None


def _from_u8(k: np.ndarray, scale) -> np.ndarray:
    # Into a 64-byte aligned buffer: numpy_function then takes the array as
    # the tensor's memory instead of copying it (the read's one copy is
    # _tf_owned's, into tf's allocator).
    buf = np.empty(k.size * 4 + 64, np.uint8)
    off = -buf.ctypes.data % 64
    out = buf[off:off + k.size * 4].view(np.float32).reshape(k.shape)
    # In place, no temporary: a fresh MiB-sized temporary is page faults.
    np.copyto(out, k, casting="unsafe")
    np.divide(out, scale, out=out)
    return out


def encode(components) -> list:
    """Component arrays (numpy, from an element) -> [(name, kind, payload)]."""
    out = []
    for j, a in enumerate(components):
        a = np.asarray(a)
        if a.dtype == object:
            out.append((str(j), BYTES, _strings(a)))
            continue
        u8 = _as_u8(a)
        if u8 is not None:
            out.append((f"{j}:{u8[0]}", ARRAY, array_payload(u8[1])))
        else:
            out.append((str(j), ARRAY, array_payload(a)))
    return out


_FIXED_BYTES = re.compile(r"^\|S[1-9][0-9]{0,8}$")


def _bad(where: str, what: str):
    raise ItemFormatError(f"ssdfeed.tf.cache: {where}: {what}")


def _component(name: str, n: int, where: str):
    """(j, tag) of a field named "j" or "j:tag"."""
    j, sep, tag = name.partition(":")
    if not j.isdigit() or str(int(j)) != j or int(j) >= n:
        _bad(where, f"names no component of the element's {n}")
    if sep and tag not in _SCALES:
        _bad(where, f"unknown stored form {tag!r}")
    return int(j), tag


def _check_array(where: str, spec, tag: str, dtype: str, shape, data) -> None:
    """A field's dtype, shape and length are what its component's spec and
    stored form allow (spec None: the meta entry's count, any int64)."""
    want = np.dtype(np.uint8 if tag else
                    (np.int64 if spec is None else spec.dtype.as_numpy_dtype)).str
    if tag and (spec is None or spec.dtype != tf.float32):
        _bad(where, "only a float32 component is stored as uint8")
    if dtype != want:
        _bad(where, f"dtype {dtype!r}, where the element_spec says {want!r}")
    if spec is not None and (len(shape) != spec.shape.rank or any(
            d is not None and d != s for d, s in zip(spec.shape.as_list(), shape))):
        _bad(where, f"shape {list(shape)} is not the element_spec's {spec.shape}")
    if len(data) != math.prod(shape) * np.dtype(want).itemsize:
        _bad(where, f"{len(data)} bytes for shape {list(shape)} of {dtype}")


def decode(fields, specs, u8_as_pairs=False) -> list:
    """ItemEntry fields -> component arrays, in component order. With
    u8_as_pairs, a float32 component stored as uint8 k comes back as the
    pair (k, scale) instead of k / scale. The fields were written by some
    process sharing the root: anything but one well-formed field per
    component of the element_spec is an ItemFormatError naming the field."""
    if len(fields) != len(specs):
        raise ItemFormatError(f"ssdfeed.tf.cache: a cached element has {len(fields)} fields, "
                              f"its element_spec {len(specs)} components")
    out = [None] * len(specs)
    for name, kind, dtype, shape, data in fields:
        where = f"element field {name!r}"
        j, tag = _component(name, len(specs), where)
        if out[j] is not None:
            _bad(where, f"component {j} stored twice")
        spec = specs[j]
        is_string = spec is not None and spec.dtype == tf.string
        if is_string and kind == BYTES and not tag:
            out[j] = _unstrings(bytes(data), where)
            if spec.shape.rank is not None and out[j].ndim != spec.shape.rank:
                _bad(where, f"strings of shape {list(out[j].shape)}, not {spec.shape}")
            continue
        if kind != ARRAY:
            _bad(where, f"kind {kind} does not hold a {spec.dtype.name if spec else 'count'} "
                        f"component")
        if is_string:  # a scalar string: numpy's fixed-width bytes ("|S5")
            if tag or not _FIXED_BYTES.match(dtype) or list(shape) != [] or \
                    len(data) != int(dtype[2:]):
                _bad(where, f"a string component stored as {dtype!r} of shape {list(shape)} "
                            f"and {len(data)} bytes, not a scalar \"|S<n>\" of n bytes")
            out[j] = np.frombuffer(data, dtype=np.dtype(dtype)).reshape(shape)
            continue
        _check_array(where, spec, tag, dtype, shape, data)
        if tag:
            k = np.frombuffer(data, dtype=np.uint8).reshape(shape)
            out[j] = (k, _SCALES[tag]) if u8_as_pairs else _from_u8(k, _SCALES[tag])
        else:
            out[j] = np.frombuffer(data, dtype=np.dtype(dtype)).reshape(shape)
    return out


def to_numpy(element) -> list:
    return [c.numpy() for c in tf.nest.flatten(element, expand_composites=True)]


# ------------------------------------------------------------------- storage
def _digest(*parts) -> str:
    return hashlib.sha256("\x00".join(map(str, parts)).encode()).hexdigest()[:24]


class Store:
    """The elements of one (key, element_spec): a C++ ItemStream
    (ssdfeed/items.h), part entries of ``part_size`` elements and a meta
    record of the element count, which a fill writes as its last step."""

    def __init__(self, root, key, element_spec, capacity, part_size, group_shared=False):
        self.part = part_size
        self.uri = f"tf:{key}"
        # compute(i) -> element i's components, by index (TfCache sets it
        # where the pipeline allows random access): get() then computes a
        # missing element under its claim, so two jobs filling one cache
        # compute each element about once.
        self.compute = None
        self._stream = _ssdfeed.ItemStream(
            root, self.uri, f"tf1 key={key} spec={_digest(repr(element_spec))}",
            lambda i: encode(self.compute(i)), part_size=part_size,
            capacity_bytes=0 if capacity is None else int(capacity), group_shared=group_shared)
        self._full_warned = False

    def _warn_unavailable(self):
        """Once: an entry the root had no room for (full of entries in use,
        or locked by a stopped process); its elements come from upstream."""
        if self._full_warned:
            return
        why = self._stream.unavailable
        if why:
            self._full_warned = True
            warnings.warn(f"ssdfeed.tf.cache: {why}; what does not fit is computed by the "
                          "pipeline each pass", stacklevel=3)

    def entry(self, p):
        """Part p, to look into: lookup(k) and present() of its elements."""
        return _Part(self, p)

    def total(self):
        """The element count, once a pass has reached the upstream's end."""
        n = self._stream.length()
        self._warn_unavailable()
        return n

    def set_total(self, n):
        self._stream.finish(n)
        self._warn_unavailable()

    def complete(self):
        """The count is recorded and every element is stored."""
        return self._stream.complete()

    def fields(self, i):
        """Element i's stored fields, or None."""
        f = self._stream.lookup(i)
        self._warn_unavailable()
        return f

    def lookup(self, i, specs):
        f = self.fields(i)
        return None if f is None else decode(f, specs)

    def get(self, i):
        """Element i's fields: stored, else computed by self.compute under
        its claim (or read once the job that claimed it stored it). None: no
        entry."""
        f = self._stream.get(i)
        self._warn_unavailable()
        return f

    def put(self, i, components):
        stored = self._stream.put(i, encode(components))
        self._warn_unavailable()
        return stored

    def present(self, total):
        return self._stream.present(total)

    def stats(self):
        return {k: v for k, v in self._stream.stats().items()
                if isinstance(v, int) and not isinstance(v, bool)}


class _Part:
    """Part p of a Store, as a one-part view (tests and tools look into one)."""

    def __init__(self, store, p):
        self._store, self._first = store, p * store.part

    def lookup(self, k):
        return self._store.fields(self._first + k)

    def present(self):
        n = self._store._stream.present(self._first + self._store.part)
        return n - self._store._stream.present(self._first)


# ------------------------------------------------------------------ dataset
def _undo_malloc_patch():
    # tf's generator datasets freeze glibc's mmap threshold as they start:
    # each element's buffers (MiBs for an image) would then be mapped,
    # faulted in and unmapped per element, 6-10 ms of page faults on a
    # 1.9 MB float image against 0.35 ms for the read itself.
    undo_tf_malloc_patch()


def _tf_owned(t):
    """t in memory of tf's own allocator.

    numpy_function hands tf an aligned numpy array as the tensor's memory,
    uncopied: glibc memory that lives as long as the element. A
    ``shuffle(10000)`` after the cache holds thousands of elements, hundreds
    of MB, spread over the malloc arenas of tf's threads; when the buffer
    drains, each arena heap (64 MB) that empties is unmapped by glibc
    whatever mallopt says, and the next pass faults every page in again:
    96,000 page faults a pass on the field report's pipeline, 4x slower than
    tf.data's cache, whose tensors come from tf's allocator and are reused.
    A copy costs one pass over the bytes; the numpy array is then freed at
    once and its memory reused by the next element. (An image stored as
    uint8 k needs no copy: tf's cast and division of k make the floats in
    tf's memory, in as many passes as numpy took.)"""
    return t if t.dtype == tf.string else tf.raw_ops.DeepCopy(x=t)


# What tf.data.experimental.at raises for a pipeline without random access.
_NO_INDEX = (tf.errors.FailedPreconditionError, tf.errors.UnimplementedError,
             tf.errors.InvalidArgumentError)


class _NoRandomAccess(Exception):
    """The upstream cannot give an element by index: fill it in order."""


class Plan:
    __slots__ = ("read", "order")

    def __init__(self, read, order):
        self.read, self.order = read, order


class TfCache:
    """What ssdfeed.tf.cache returns the dataset of (its ``stats()``)."""

    def __init__(self, ds, key, root, capacity, shuffle, seed, part_size=_PART,
                 group_shared=False):
        self.upstream = ds
        self.spec = ds.element_spec
        self.specs = component_specs(self.spec)
        self.store = Store(root, key, self.spec, capacity, part_size, group_shared)
        self.shuffle, self.seed = shuffle, seed
        self._passes = itertools.count()
        self._ids = itertools.count()
        self._plans = {}
        self._random_access = None  # unknown until a resume asks
        card = int(ds.cardinality())
        self.known_total = card if card >= 0 else None
        self.store.compute = self._at_index
        self._computed = threading.local()  # the element _at_index computed last

    # One plan per pass, made when the pass starts; the read and the fill
    # datasets of that pass both follow it.
    def _new_plan(self):
        epoch = next(self._passes)
        read = self.store.complete()
        order = None
        if read:  # the Loader's order for (seed, epoch): one shuffle in C++ and Python
            total = self.store.total()
            order = np.frombuffer(_ssdfeed.epoch_order(total, self.shuffle, self.seed, epoch),
                                  np.uint64).astype(np.int64)
        pid = next(self._ids)
        self._plans[pid] = Plan(read, order)
        yield np.int64(pid)

    def _read_indices(self, pid):
        _undo_malloc_patch()  # tf applied it again as this generator's iterator started
        plan = self._plans[int(pid)]
        if not plan.read:
            return
        # A pass left early never reaches _fill, which drops the plan: keep
        # no N-long order in it.
        order, plan.order = plan.order, None
        for s in range(0, len(order), _INDEX_CHUNK):
            yield order[s:s + _INDEX_CHUNK].astype(np.int64)

    def _read_np(self, i):
        """Element i's components as numpy_function returns them: a float32
        component as three outputs (uint8 k, scale, floats): k / scale when
        it was stored as k (scale > 0), else the floats (scale 0)."""
        i = int(i)
        f = self.store.fields(i)
        if f is not None:
            comps = decode(f, self.specs, u8_as_pairs=True)
        else:  # dropped since the pass began: compute it again
            comps = to_numpy(self._upstream_from(i).__next__())
            self.store.put(i, comps)
        out = []
        for c, s in zip(comps, self.specs):
            if s.dtype != tf.float32:
                out.append(c)
            elif isinstance(c, tuple):
                out += [c[0], c[1], _NO_FLOATS]
            else:
                out += [_NO_U8, np.float32(0), c]
        return out

    def _read_one(self, i):
        dtypes = []
        for s in self.specs:
            dtypes += [tf.uint8, tf.float32, tf.float32] if s.dtype == tf.float32 else [s.dtype]
        outs = tf.numpy_function(self._read_np, [i], dtypes, stateful=True)
        outs = iter(outs if isinstance(outs, (list, tuple)) else [outs])
        comps = []
        for s in self.specs:
            if s.dtype == tf.float32:
                k, scale, floats = next(outs), next(outs), next(outs)
                # tf's division, as numpy's, is IEEE float32's: the same bits
                # (test_a_decoded_image_as_float_..._bit_for_bit).
                c = tf.cond(scale > 0, lambda k=k, scale=scale: tf.cast(k, tf.float32) / scale,
                            lambda floats=floats: _tf_owned(floats))
            else:
                c = _tf_owned(next(outs))
            c.set_shape(s.shape)
            comps.append(c)
        return tf.nest.pack_sequence_as(self.spec, comps, expand_composites=True)

    def _pack(self, comps):
        tensors = [tf.constant(c, dtype=s.dtype) for c, s in zip(comps, self.specs)]
        return tf.nest.pack_sequence_as(self.spec, tensors, expand_composites=True)

    def _upstream_from(self, i):
        """An iterator over the upstream's elements i, i+1, ...: by index
        (tf.data.experimental.at) where the pipeline allows random access,
        so nothing before i is computed; else ds.skip(i), which runs the
        whole pipeline for the first i elements.

        This runs inside tf.data's generator threads: it makes no new tf
        function (tracing there races with the pipeline's own functions),
        only eager ops on the datasets that exist."""
        if i > 0 and self.known_total is not None and self._random_access is not False:
            try:
                first = tf.data.experimental.at(self.upstream, i)
                self._random_access = True
                return itertools.chain([first], self._by_index(i + 1))
            except _NO_INDEX:
                self._random_access = False
        return iter(self.upstream.skip(i))

    def _at_index(self, i):
        """Element i's components, computed by index: what a claimed fill
        (Store.get) runs for an element no job has stored."""
        try:
            el = tf.data.experimental.at(self.upstream, i)
        except _NO_INDEX as e:
            raise _NoRandomAccess(str(e)) from None
        self._computed.element = (i, el)  # compute runs on the thread that asked
        return to_numpy(el)

    def _claimed(self, i):
        """Element i from the cache or, where the pipeline allows access by
        index, computed here under its claim while another job computing it
        is waited for; None when the upstream must go on from i."""
        if self.known_total is None or self._random_access is False:
            return self._stored(i)
        self._computed.element = None
        try:
            fields = self.store.get(i)
        except _NoRandomAccess:
            self._random_access = False
            return self._stored(i)
        self._random_access = self._random_access or fields is not None
        if fields is None:
            return None
        mine = self._computed.element
        if mine is not None and mine[0] == i:
            # Computed here: the upstream's own tensors (what was stored
            # decodes to them bit for bit), not a decoded copy of them.
            return mine[1]
        return self._pack(decode(fields, self.specs))

    def _stored(self, i):
        comps = self.store.lookup(i, self.specs)
        return None if comps is None else self._pack(comps)

    def _by_index(self, start):
        for j in range(start, self.known_total):
            yield tf.data.experimental.at(self.upstream, j)

    def _fill(self, pid):
        """A pass over an incomplete cache: stored elements are read; where
        the upstream gives elements by index, a missing one is computed under
        its claim (another job filling at once computes the others); else the
        first missing one starts the upstream there, and from then on the
        upstream feeds the pass and the cache to its end."""
        if self._plans.pop(int(pid)).read:
            return
        _undo_malloc_patch()
        total = self.store.total() or self.known_total
        it, i = None, 0
        while total is None or i < total:
            if it is None:
                el = self._claimed(i)
                if el is not None:
                    yield el
                    i += 1
                    continue
                it = self._upstream_from(i)
            try:
                el = next(it)
            except StopIteration:
                break
            self.store.put(i, to_numpy(el))
            yield el
            i += 1
        self.store.set_total(i)

    def _pass(self, pid):
        read = (tf.data.Dataset.from_generator(self._read_indices, args=(pid,),
                                               output_signature=tf.TensorSpec([None], tf.int64))
                .unbatch()
                .map(self._read_one, num_parallel_calls=tf.data.AUTOTUNE, deterministic=True))
        fill = tf.data.Dataset.from_generator(self._fill, args=(pid,),
                                              output_signature=self.spec)
        return read.concatenate(fill)

    def stats(self) -> dict:
        """The part entries' counters (this process's), summed."""
        return self.store.stats()

    def dataset(self) -> tf.data.Dataset:
        ds = (tf.data.Dataset.from_generator(self._new_plan,
                                             output_signature=tf.TensorSpec([], tf.int64))
              .flat_map(self._pass))
        total = self.store.total() if self.known_total is None else self.known_total
        if total is not None:
            ds = ds.apply(tf.data.experimental.assert_cardinality(total))
        return ds
