#!/usr/bin/env python3
"""Writes a metadata-only copy of a GGUF file: the same header version and key/values, zero tensors.

Used to keep the tokenizer metadata (tokenizer.ggml.*, tokenizer.chat_template) of the reference GGUF
files as small test fixtures. Python 3 standard library only.

    python3 scripts/make_gguf_tokenizer_fixture.py IN.gguf OUT.gguf [--zstd]

With --zstd the output is compressed with the `zstd` program (OUT.gguf.zst), as tests/fixtures stores it.
"""
import argparse
import os
import struct
import subprocess
import sys

# Sizes of the fixed-size GGUF value types (u8 i8 u16 i16 u32 i32 f32 bool _ _ u64 i64 f64).
FIXED = {0: 1, 1: 1, 2: 2, 3: 2, 4: 4, 5: 4, 6: 4, 7: 1, 10: 8, 11: 8, 12: 8}
STRING, ARRAY = 8, 9


class Reader:
    def __init__(self, data):
        self.data, self.pos = data, 0

    def take(self, n):
        if self.pos + n > len(self.data):
            sys.exit(f"truncated GGUF at byte {self.pos}")
        b = self.data[self.pos:self.pos + n]
        self.pos += n
        return b

    def u32(self):
        return struct.unpack("<I", self.take(4))[0]

    def u64(self):
        return struct.unpack("<Q", self.take(8))[0]

    def skip_value(self, vtype):
        if vtype in FIXED:
            self.take(FIXED[vtype])
        elif vtype == STRING:
            self.take(self.u64())
        elif vtype == ARRAY:
            etype, count = self.u32(), self.u64()
            if etype in FIXED:
                self.take(FIXED[etype] * count)
            else:
                for _ in range(count):
                    self.skip_value(etype)
        else:
            sys.exit(f"unknown GGUF value type {vtype} at byte {self.pos}")


def metadata_only(data):
    r = Reader(data)
    if r.take(4) != b"GGUF":
        sys.exit("not a GGUF file")
    version = r.u32()
    r.u64()  # tensor count, dropped
    n_kv = r.u64()
    kv_start = r.pos
    for _ in range(n_kv):
        r.take(r.u64())  # key
        r.skip_value(r.u32())
    return b"GGUF" + struct.pack("<IQQ", version, 0, n_kv) + data[kv_start:r.pos]


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("input")
    ap.add_argument("output")
    ap.add_argument("--zstd", action="store_true", help="write OUTPUT.zst with the zstd program")
    args = ap.parse_args()
    with open(args.input, "rb") as f:
        out = metadata_only(f.read())
    with open(args.output, "wb") as f:
        f.write(out)
    if args.zstd:
        subprocess.run(["zstd", "-q", "-19", "-f", "--rm", args.output, "-o", args.output + ".zst"], check=True)
        print(f"{args.output}.zst: {os.path.getsize(args.output + '.zst')} bytes ({len(out)} uncompressed)")
    else:
        print(f"{args.output}: {len(out)} bytes")


if __name__ == "__main__":
    main()
