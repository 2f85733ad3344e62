#!/usr/bin/env python3
"""st_interop.py: reads a safetensors file written by zinc with an independent
reader and checks it against an expected description (spec Z-ST-002).

Readers, first available wins (or --reader):
  safetensors  the huggingface package (its Rust reader validates the file)
  python       a minimal parser written here: json header + struct/numpy
Values are decoded with numpy when it is importable, else with struct, so the
script runs on a CI machine that has only python3 (or python3-numpy).

Usage:
  python3 tests/st_interop.py FILE [--expect-json JSON] [--subset] [--rtol R]
                              [--reader auto|safetensors|python]
JSON maps tensor names to {"dtype": "F32", "shape": [2, 3], "sum": 1.5,
"sha256": "<hex of the raw bytes>"} (every key optional); the key
"__metadata__" maps to the exact expected metadata dict. Without --subset the
file must hold exactly the named tensors.

Prints one line per tensor: name, dtype, shape, sum (math.fsum of the values
as float64, so it does not depend on the summation order), sha256 of the raw
bytes. Exit status: 0 the file reads (and matches), 1 a mismatch, 2 the file
cannot be read or the arguments are bad.
"""
import argparse
import hashlib
import json
import math
import struct
import sys

# element size and struct format (little-endian) of each dtype zinc writes;
# BF16 has no struct or numpy format: it is the top half of an F32
DTYPES = {"F64": (8, "d"), "F32": (4, "f"), "F16": (2, "e"), "BF16": (2, None),
          "U64": (8, "Q"), "I64": (8, "q"), "U8": (1, "B"), "I8": (1, "b"),
          "I32": (4, "i"), "U32": (4, "I"), "I16": (2, "h"), "U16": (2, "H"),
          "BOOL": (1, "?")}
MAX_HEADER = 100_000_000


class ReadError(Exception):
    pass


def read_with_package(data):
    """The huggingface reader: (version, [(name, dtype, shape, raw)], metadata)."""
    import safetensors
    tensors = [(name, d["dtype"], list(d["shape"]), bytes(d["data"]))
               for name, d in safetensors.deserialize(data)]
    # deserialize does not return __metadata__; the package validated the
    # header, so reading it back here is only a lookup
    n = struct.unpack_from("<Q", data, 0)[0]
    meta = json.loads(data[8:8 + n].decode("utf-8")).get("__metadata__") or {}
    return "safetensors " + getattr(safetensors, "__version__", "?"), tensors, meta


def no_duplicates(pairs):
    keys = [k for k, _ in pairs]
    if len(set(keys)) != len(keys):
        raise ReadError("duplicate key in the header")
    return dict(pairs)


def read_with_python(data):
    """A minimal independent reader with the format's main checks."""
    if len(data) < 8:
        raise ReadError("file shorter than 8 bytes")
    n = struct.unpack_from("<Q", data, 0)[0]
    if n > MAX_HEADER or 8 + n > len(data):
        raise ReadError("bad header length %d" % n)
    try:
        header = json.loads(data[8:8 + n].decode("utf-8"), object_pairs_hook=no_duplicates)
    except (UnicodeDecodeError, ValueError) as e:
        raise ReadError("bad header: %s" % e)
    if not isinstance(header, dict):
        raise ReadError("header is not an object")
    meta = header.pop("__metadata__", None) or {}
    if not all(isinstance(k, str) and isinstance(v, str) for k, v in meta.items()):
        raise ReadError("__metadata__ must map strings to strings")
    entries = []
    for name, info in header.items():
        dtype, shape, (b, e) = info["dtype"], info["shape"], info["data_offsets"]
        if dtype not in DTYPES:
            raise ReadError("tensor %r: unknown dtype %r" % (name, dtype))
        numel = math.prod(shape)
        if e - b != numel * DTYPES[dtype][0]:
            raise ReadError("tensor %r: %d bytes for %s %s" % (name, e - b, dtype, shape))
        entries.append((b, e, name, dtype, shape))
    entries.sort()
    pos = 0
    for b, e, name, _, _ in entries:
        if b != pos:
            raise ReadError("tensor %r: offsets leave a hole or overlap" % name)
        pos = e
    if 8 + n + pos != len(data):
        raise ReadError("byte buffer is %d bytes, tensors cover %d" % (len(data) - 8 - n, pos))
    base = 8 + n
    tensors = [(name, dtype, shape, data[base + b:base + e]) for b, e, name, dtype, shape in entries]
    return "python (json + struct)", tensors, meta


def values(dtype, raw):
    """The elements as Python floats/ints, in file order."""
    try:
        import numpy as np
        if dtype == "BF16":
            u = np.frombuffer(raw, dtype="<u2").astype(np.uint32) << 16
            return u.view("<f4").astype(np.float64).tolist()
        return np.frombuffer(raw, dtype="<" + DTYPES[dtype][1]).tolist()
    except ImportError:
        size, fmt = DTYPES[dtype]
        count = len(raw) // size
        if dtype == "BF16":
            halves = struct.unpack("<%dH" % count, raw)
            return [struct.unpack("<f", struct.pack("<I", h << 16))[0] for h in halves]
        return list(struct.unpack("<%d%s" % (count, fmt), raw))


def total(vals):
    try:
        return math.fsum(float(v) for v in vals)
    except (ValueError, OverflowError):   # inf - inf: no exact sum exists
        return float("nan")


def close(a, b, rtol):
    if isinstance(a, float) and math.isnan(a):
        return isinstance(b, float) and math.isnan(b)
    return a == b or abs(a - b) <= rtol * max(abs(a), abs(b)) + 1e-12


def compare(found, meta, expect, subset, rtol):
    """Mismatch messages; found maps name -> (dtype, shape, sum, sha)."""
    bad = []
    want_meta = expect.pop("__metadata__", None)
    if want_meta is not None and want_meta != meta:
        bad.append("__metadata__ is %s, expected %s" % (json.dumps(meta, sort_keys=True),
                                                       json.dumps(want_meta, sort_keys=True)))
    for name, want in expect.items():
        if name not in found:
            bad.append("tensor %r is missing" % name)
            continue
        dtype, shape, s, sha = found[name]
        if "dtype" in want and want["dtype"] != dtype:
            bad.append("tensor %r: dtype %s, expected %s" % (name, dtype, want["dtype"]))
        if "shape" in want and list(want["shape"]) != shape:
            bad.append("tensor %r: shape %s, expected %s" % (name, shape, want["shape"]))
        if "sum" in want and not close(s, float(want["sum"]), rtol):
            bad.append("tensor %r: sum %r, expected %r" % (name, s, want["sum"]))
        if "sha256" in want and want["sha256"] != sha:
            bad.append("tensor %r: sha256 %s, expected %s" % (name, sha, want["sha256"]))
    if not subset:
        for name in sorted(set(found) - set(expect)):
            bad.append("tensor %r is not expected" % name)
    return bad


def main(argv):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("file")
    ap.add_argument("--expect-json", help="expected tensors (and __metadata__), as JSON")
    ap.add_argument("--subset", action="store_true", help="the file may hold other tensors too")
    ap.add_argument("--rtol", type=float, default=1e-9, help="relative tolerance on sums (default 1e-9)")
    ap.add_argument("--reader", choices=["auto", "safetensors", "python"], default="auto")
    args = ap.parse_args(argv)
    try:
        expect = json.loads(args.expect_json) if args.expect_json else None
    except ValueError as e:
        print("st_interop: --expect-json: %s" % e, file=sys.stderr)
        return 2
    if expect is not None and not isinstance(expect, dict):
        print("st_interop: --expect-json must be an object", file=sys.stderr)
        return 2
    try:
        with open(args.file, "rb") as f:
            data = f.read()
    except OSError as e:
        print("st_interop: %s" % e, file=sys.stderr)
        return 2
    reader = args.reader
    if reader == "auto":
        try:
            import safetensors  # noqa: F401
            reader = "safetensors"
        except ImportError:
            reader = "python"
    try:
        name, tensors, meta = (read_with_package if reader == "safetensors" else read_with_python)(data)
    except ImportError as e:
        print("st_interop: %s" % e, file=sys.stderr)
        return 2
    except Exception as e:   # the package raises its own SafetensorError
        print("st_interop: %s: cannot read: %s" % (args.file, e), file=sys.stderr)
        return 2
    try:
        import numpy
        name += ", values: numpy " + numpy.__version__
    except ImportError:
        name += ", values: struct"
    print("reader: " + name)
    for k in sorted(meta):
        print("meta %s=%s" % (k, meta[k]))
    found = {}
    for tname, dtype, shape, raw in sorted(tensors):
        if dtype not in DTYPES:
            print("st_interop: tensor %r: dtype %s not supported here" % (tname, dtype), file=sys.stderr)
            return 2
        s = total(values(dtype, raw))
        sha = hashlib.sha256(raw).hexdigest()
        found[tname] = (dtype, shape, s, sha)
        print("tensor %s %s %s sum=%r sha256=%s" % (tname, dtype, json.dumps(shape), s, sha[:16]))
    if expect is None:
        return 0
    bad = compare(found, meta, dict(expect), args.subset, args.rtol)
    for line in bad:
        print("MISMATCH " + line)
    print("st_interop: %s" % ("match" if not bad else "%d mismatches" % len(bad)))
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
