#!/usr/bin/env python3
"""Builds tests/fixtures/quant/quant-rows.safetensors.zst, the quant decoders' oracle fixture.

For every entry `<file tag>/<tensor>/<type>` of each ../shared/reference/gguf/<model>/dequant-oracle.safetensors
(the first 32 rows of one tensor of one GGUF file, dequantized to float32 by llama.cpp's gguf-py), this
reads the GGUF file <model>/<model>-<file tag>.gguf, finds the tensor, checks its type, and copies the packed
bytes of the same 32 rows. The output holds, per entry, two tensors:

  <model>/<file tag>/<tensor>/<type>/packed    U8  [32, row bytes]  the blocks as stored in the GGUF
  <model>/<file tag>/<tensor>/<type>/expected  F32 [32, row length] the oracle's rows

and in __metadata__ "entries": a JSON list of {name, type (lower case, as DTypeName), cols, source}. The GGUF
files themselves stay out of the repository (they are megabytes; the fixture is well under one).

Python 3 standard library only. Usage (from the repository root; needs the zstd program):
  python3 scripts/make_quant_fixture.py [--reference ../shared/reference/gguf] [--out tests/fixtures/quant]
"""
import argparse
import json
import os
import struct
import subprocess
import sys
import tempfile

ROWS = 32

# ggml type id -> (name, elements per block, bytes per block); the types the oracle can name.
GGML_TYPES = {
    0: ("F32", 1, 4), 1: ("F16", 1, 2), 2: ("Q4_0", 32, 18), 3: ("Q4_1", 32, 20), 6: ("Q5_0", 32, 22),
    7: ("Q5_1", 32, 24), 8: ("Q8_0", 32, 34), 10: ("Q2_K", 256, 84), 11: ("Q3_K", 256, 110),
    12: ("Q4_K", 256, 144), 13: ("Q5_K", 256, 176), 14: ("Q6_K", 256, 210), 20: ("IQ4_NL", 32, 18),
    23: ("IQ4_XS", 256, 136), 30: ("BF16", 1, 2),
}

# GGUF metadata value types -> struct format of the scalar ones.
SCALAR = {0: "<B", 1: "<b", 2: "<H", 3: "<h", 4: "<I", 5: "<i", 6: "<f", 7: "<?", 10: "<Q", 11: "<q", 12: "<d"}
STRING, ARRAY = 8, 9


class Reader:
    def __init__(self, data):
        self.data, self.pos = data, 0

    def take(self, fmt):
        (v,) = struct.unpack_from(fmt, self.data, self.pos)
        self.pos += struct.calcsize(fmt)
        return v

    def string(self):
        n = self.take("<Q")
        s = self.data[self.pos:self.pos + n].decode("utf-8")
        self.pos += n
        return s

    def value(self, vtype):
        if vtype in SCALAR:
            return self.take(SCALAR[vtype])
        if vtype == STRING:
            return self.string()
        if vtype == ARRAY:
            etype, count = self.take("<I"), self.take("<Q")
            return [self.value(etype) for _ in range(count)]
        raise ValueError(f"unknown GGUF value type {vtype} at byte {self.pos}")


def read_gguf(path):
    """Returns (data, {tensor name: (ggml type id, ne list innermost first, absolute offset)})."""
    with open(path, "rb") as f:
        data = f.read()
    r = Reader(data)
    if r.take("<I") != 0x46554747:  # "GGUF"
        raise ValueError(f"{path}: not a GGUF file")
    version = r.take("<I")
    if version != 3:
        raise ValueError(f"{path}: GGUF version {version}, expected 3")
    n_tensors, n_kv = r.take("<Q"), r.take("<Q")
    alignment = 32
    for _ in range(n_kv):
        key = r.string()
        value = r.value(r.take("<I"))
        if key == "general.alignment":
            alignment = value
    infos = {}
    for _ in range(n_tensors):
        name = r.string()
        n_dims = r.take("<I")
        ne = [r.take("<Q") for _ in range(n_dims)]
        infos[name] = (r.take("<I"), ne, r.take("<Q"))
    data_start = (r.pos + alignment - 1) // alignment * alignment
    return data, {k: (t, ne, data_start + off) for k, (t, ne, off) in infos.items()}


def read_safetensors(path):
    with open(path, "rb") as f:
        data = f.read()
    (n,) = struct.unpack_from("<Q", data, 0)
    header = json.loads(data[8:8 + n])
    header.pop("__metadata__", None)
    return {k: (v["dtype"], v["shape"], data[8 + n + v["data_offsets"][0]:8 + n + v["data_offsets"][1]])
            for k, v in header.items()}


def write_safetensors(path, tensors, metadata):
    """tensors: list of (name, dtype, shape, bytes); every entry 8-byte aligned."""
    header, blobs, offset = {"__metadata__": metadata}, [], 0
    for name, dtype, shape, blob in tensors:
        pad = (-len(blob)) % 8
        header[name] = {"dtype": dtype, "shape": shape, "data_offsets": [offset, offset + len(blob)]}
        blobs.append(blob + b"\0" * pad)
        offset += len(blob) + pad
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * ((-len(text)) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)) + text + b"".join(blobs))


def main():
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--reference", default=os.path.join(root, "..", "shared", "reference", "gguf"))
    ap.add_argument("--out", default=os.path.join(root, "tests", "fixtures", "quant"))
    args = ap.parse_args()

    tensors, entries = [], []
    for model in sorted(os.listdir(args.reference)):
        oracle_path = os.path.join(args.reference, model, "dequant-oracle.safetensors")
        if not os.path.exists(oracle_path):
            continue
        oracle = read_safetensors(oracle_path)
        ggufs = {}
        for key in sorted(oracle):
            dtype, shape, expected = oracle[key]
            tag, tensor, type_name = key.split("/")
            if dtype != "F32" or len(shape) != 2 or shape[0] != ROWS:
                raise ValueError(f"{oracle_path}: {key} is {dtype}{shape}, expected F32[{ROWS}, n]")
            gguf_path = os.path.join(args.reference, model, f"{model}-{tag}.gguf")
            if gguf_path not in ggufs:
                ggufs[gguf_path] = read_gguf(gguf_path)
            data, infos = ggufs[gguf_path]
            ggml_type, ne, offset = infos[tensor]
            name, block, block_bytes = GGML_TYPES[ggml_type]
            if name != type_name or ne[0] != shape[1]:
                raise ValueError(f"{gguf_path}: {tensor} is {name} with rows of {ne[0]}; oracle says {key} {shape}")
            row_bytes = ne[0] // block * block_bytes
            packed = data[offset:offset + ROWS * row_bytes]
            if len(packed) != ROWS * row_bytes:
                raise ValueError(f"{gguf_path}: {tensor} runs past the end of the file")
            full = f"{model}/{key}"
            tensors.append((full + "/packed", "U8", [ROWS, row_bytes], packed))
            tensors.append((full + "/expected", "F32", [ROWS, shape[1]], expected))
            entries.append({"name": full, "type": type_name.lower(), "cols": shape[1],
                            "source": os.path.basename(gguf_path)})
            print(f"{full}: {type_name}, {ROWS} rows of {ne[0]} ({row_bytes} bytes each)")

    metadata = {"entries": json.dumps(entries), "made_by": "scripts/make_quant_fixture.py",
                "oracle": "llama.cpp gguf-py dequantize (commit a95a11e5), ../shared/reference/gguf"}
    os.makedirs(args.out, exist_ok=True)
    out = os.path.join(args.out, "quant-rows.safetensors.zst")
    with tempfile.TemporaryDirectory() as tmp:
        raw = os.path.join(tmp, "quant-rows.safetensors")
        write_safetensors(raw, tensors, metadata)
        subprocess.run(["zstd", "-q", "-19", "-f", raw, "-o", out], check=True)
    print(f"{out}: {len(entries)} entries, {os.path.getsize(out)} bytes")


if __name__ == "__main__":
    sys.exit(main())
