#!/usr/bin/env python3
# FP8 fixtures: tiny random Qwen checkpoints laid out exactly as Qwen's official FP8 checkpoints
# (config.json `quantization_config` {quant_method: fp8, fmt: e4m3, activation_scheme: dynamic,
# weight_block_size: [128, 128], modules_to_not_convert}; every quantized linear `X.weight` F8_E4M3
# [out, in] with `X.weight_scale_inv` [ceil(out/128), ceil(in/128)]), plus transformers' logits.
#
#   python3 scripts/make_fp8_fixtures.py --src tests/fixtures --out /tmp/fp8
#
# Needs torch, safetensors and transformers (5.17 on the GPU machine); runs on the CPU. --src holds
# models/<name>/config.json of the bf16 fixtures (tests/fixtures or build/<dir>/fixtures): only their
# configs are reused, shrunk to fit the repo's size budget and with every linear input dimension a
# multiple of 128 (as in every real Qwen FP8 checkpoint; Infernix refuses other in-dims). Writes
# $out/<name>-fp8/{config.json, generation_config.json, model.safetensors, reference.safetensors,
# reference.json}; compress model.safetensors and reference.safetensors with `zstd -19` for the repo.
#
# Quantization, per 128x128 block of a weight w (f32): scale = amax(|w|) / 448 (1 for an all-zero
# block), rounded to the scale's storage dtype; fp8 = (w / scale).clamp(-448, 448).to(float8_e4m3fn);
# saved weight_scale_inv = scale. The dequantized weight is fp8.to(f32) * scale_inv (f32 product), the
# values Infernix's loader produces.
#
# The reference: transformers cannot compute with FP8 weights the way we do. On a GPU its FP8Linear
# quantizes the activations too (per token, groups of 128, triton kernel) and runs an FP8 GEMM; without
# a GPU its FP8 quantizer dequantizes the weights at load ("dequantize" fallback) into the model dtype.
# So the logits here come from the same architecture in transformers with the dequantized weights
# (fp8.to(f32) * scale_inv) loaded as float32, eager attention, float32 math on the CPU: exactly the
# weights Infernix uses, so an f32 engine should agree to about 1e-4 relative, like the bf16 fixtures.
# reference.json also records, when transformers can load the FP8 folder itself, how far its own
# logits are from that reference (information only).
import argparse
import json
import math
import os
import shutil
import tempfile

import torch
import transformers
from safetensors import safe_open
from safetensors.torch import save_file

BLOCK = 128
FP8_MAX = 448.0

# name: (source fixture, overrides of its config, seed, prompt lengths, generate prompt, new tokens,
#        storage dtype of weight_scale_inv). Qwen3 FP8 checkpoints store f32 scales; bf16 is exercised too.
SPECS = {
    "qwen3-tiny-fp8": dict(
        src="qwen3-tiny", seed=21, lengths=[1, 7, 40], gen_prompt=12, gen_new=8, scale_dtype=torch.float32,
        cfg=dict(vocab_size=1024, num_hidden_layers=2, intermediate_size=384,
                 layer_types=["full_attention"] * 2)),
    "qwen3-next-tiny-fp8": dict(
        src="qwen3-next-tiny", seed=23, lengths=[1, 5, 65], gen_prompt=12, gen_new=8, scale_dtype=torch.bfloat16,
        cfg=dict(vocab_size=1024, num_hidden_layers=2, layer_types=["linear_attention", "full_attention"],
                 num_experts=4, num_experts_per_tok=2, moe_intermediate_size=128,
                 shared_expert_intermediate_size=128, intermediate_size=256)),
}

# Linear layers Qwen's FP8 checkpoints keep in bf16 (listed in modules_to_not_convert): the LM head,
# the MoE router, the shared-expert gate and Qwen3-Next's in_proj_ba.
KEEP_SUFFIXES = ("lm_head", "mlp.gate", "mlp.shared_expert_gate", "linear_attn.in_proj_ba")


def randomize(model, seed):
    # As ../shared/reference/make_fixtures.py: random norms, biases and weights, stored values bf16-exact.
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if "A_log" in name:
                continue
            if p.dim() == 1:
                m = float(p.mean())
                if abs(m - 1.0) < 1e-3:
                    p.copy_(1.0 + 0.2 * torch.randn(p.shape, generator=g))
                elif abs(m) < 1e-3 and "norm" in name:
                    p.copy_(0.2 * torch.randn(p.shape, generator=g))
                else:
                    p.copy_(0.1 * torch.randn(p.shape, generator=g))
            elif "embed_tokens" in name:
                p.copy_(torch.randn(p.shape, generator=g))
            else:
                std = 1.0 / p.shape[-1] ** 0.5
                if name.endswith("mlp.gate.weight") or name.endswith("router.weight"):
                    std *= 3.0
                p.copy_(std * torch.randn(p.shape, generator=g))
        for p in model.parameters():
            p.copy_(p.to(torch.bfloat16).to(torch.float32))


def is_quantized_linear(name, t):
    if t.dim() != 2 or not name.endswith(".weight"):
        return False
    module = name[: -len(".weight")]
    if "embed_tokens" in module or "norm" in module or "conv1d" in module:
        return False
    return not any(module == s or module.endswith("." + s) for s in KEEP_SUFFIXES)


def quantize(w, scale_dtype):
    """w: [out, in] f32 -> (fp8 [out, in], scale_inv [ceil(out/128), ceil(in/128)], dequantized f32)."""
    out_dim, in_dim = w.shape
    assert in_dim % BLOCK == 0, f"in-dim {in_dim} is not a multiple of {BLOCK}"
    rb, cb = math.ceil(out_dim / BLOCK), in_dim // BLOCK
    padded = torch.zeros(rb * BLOCK, in_dim, dtype=torch.float32)
    padded[:out_dim] = w
    blocks = padded.reshape(rb, BLOCK, cb, BLOCK)
    amax = blocks.abs().amax(dim=(1, 3))
    scale = torch.where(amax > 0, amax / FP8_MAX, torch.ones_like(amax)).to(scale_dtype)
    s = scale.to(torch.float32)[:, None, :, None]
    fp8 = (blocks / s).clamp(-FP8_MAX, FP8_MAX).to(torch.float8_e4m3fn)
    deq = fp8.to(torch.float32) * s
    fp8 = fp8.reshape(rb * BLOCK, in_dim)[:out_dim].contiguous()
    deq = deq.reshape(rb * BLOCK, in_dim)[:out_dim].contiguous()
    return fp8, scale.contiguous(), deq


def load_tensors(path):
    with safe_open(path, "pt") as f:
        return {k: f.get_tensor(k) for k in f.keys()}


def make(name, spec, src_root, out_root, work):
    src = os.path.join(src_root, "models", spec["src"])
    cfg = json.load(open(os.path.join(src, "config.json")))
    cfg.update(spec["cfg"])
    bf16_dir = os.path.join(work, name + "-bf16")
    os.makedirs(bf16_dir, exist_ok=True)
    json.dump(cfg, open(os.path.join(bf16_dir, "config.json"), "w"), indent=2)
    config = transformers.AutoConfig.from_pretrained(bf16_dir)
    config._attn_implementation = "eager"
    torch.manual_seed(spec["seed"])
    model = transformers.AutoModelForCausalLM.from_config(config).float().eval()
    randomize(model, spec["seed"])
    model.to(torch.bfloat16).save_pretrained(bf16_dir)  # the checkpoint's own tensor names and layout
    del model
    tensors = load_tensors(os.path.join(bf16_dir, "model.safetensors"))

    fp8_tensors, deq_tensors, not_converted = {}, {}, []
    for k, t in sorted(tensors.items()):
        if is_quantized_linear(k, t):
            fp8, scale_inv, deq = quantize(t.to(torch.float32), spec["scale_dtype"])
            fp8_tensors[k] = fp8
            fp8_tensors[k[: -len(".weight")] + ".weight_scale_inv"] = scale_inv
            deq_tensors[k] = deq
        else:
            fp8_tensors[k] = t.contiguous()
            deq_tensors[k] = t.to(torch.float32).contiguous()
            if t.dim() == 2 and k.endswith(".weight") and "norm" not in k and "embed_tokens" not in k:
                not_converted.append(k[: -len(".weight")])
    n_fp8 = sum(1 for t in fp8_tensors.values() if t.dtype == torch.float8_e4m3fn)
    assert n_fp8 > 0

    d = os.path.join(out_root, name)
    os.makedirs(d, exist_ok=True)
    out_cfg = dict(cfg)
    out_cfg["dtype"] = "bfloat16"
    out_cfg["quantization_config"] = {
        "activation_scheme": "dynamic", "fmt": "e4m3", "quant_method": "fp8",
        "weight_block_size": [BLOCK, BLOCK], "modules_to_not_convert": not_converted}
    json.dump(out_cfg, open(os.path.join(d, "config.json"), "w"), indent=2, sort_keys=True)
    gen = os.path.join(src, "generation_config.json")
    if os.path.exists(gen):
        shutil.copy(gen, os.path.join(d, "generation_config.json"))
    save_file(fp8_tensors, os.path.join(d, "model.safetensors"), metadata={"format": "pt"})

    # The reference model: same architecture, the dequantized weights as float32.
    deq_dir = os.path.join(work, name + "-deq")
    os.makedirs(deq_dir, exist_ok=True)
    deq_cfg = dict(cfg)
    deq_cfg["dtype"] = "float32"
    json.dump(deq_cfg, open(os.path.join(deq_dir, "config.json"), "w"), indent=2)
    save_file(deq_tensors, os.path.join(deq_dir, "model.safetensors"), metadata={"format": "pt"})
    model, info = transformers.AutoModelForCausalLM.from_pretrained(
        deq_dir, dtype=torch.float32, attn_implementation="eager", output_loading_info=True)
    model.eval()
    bad = {k: v for k, v in info.items() if v and k in ("missing_keys", "unexpected_keys", "mismatched_keys")}
    assert not bad, f"{name}: dequantized model did not load cleanly: {bad}"

    vocab = cfg["vocab_size"]
    g = torch.Generator().manual_seed(spec["seed"] + 1)
    ref = {}
    meta = {"arch": cfg["model_type"], "prompts": [], "generate": None, "source_config": spec["src"],
            "quantized_tensors": n_fp8, "scale_dtype": str(spec["scale_dtype"]).replace("torch.", ""),
            "note": ("logits are float32 from transformers %s eager on CPU, from the dequantized weights "
                     "fp8.to(float32) * weight_scale_inv (128x128 blocks) loaded as float32; made by "
                     "scripts/make_fp8_fixtures.py" % transformers.__version__)}
    with torch.no_grad():
        for i, L in enumerate(spec["lengths"]):
            ids = torch.randint(0, vocab, (L,), generator=g)
            ref[f"prompt.{i}.ids"] = ids.to(torch.int32)
            ref[f"prompt.{i}.logits"] = model(input_ids=ids[None]).logits[0].float().contiguous()
            meta["prompts"].append({"index": i, "length": L})
        ids = torch.randint(0, vocab, (spec["gen_prompt"],), generator=g)
        out = model.generate(ids[None], max_new_tokens=spec["gen_new"], min_new_tokens=spec["gen_new"],
                             do_sample=False, output_logits=True, return_dict_in_generate=True, pad_token_id=0,
                             eos_token_id=None)
        ref["generate.prompt_ids"] = ids.to(torch.int32)
        ref["generate.new_ids"] = out.sequences[0, len(ids):].to(torch.int32).contiguous()
        ref["generate.step_logits"] = torch.stack([x[0].float() for x in out.logits]).contiguous()
        meta["generate"] = {"prompt_length": spec["gen_prompt"], "new_tokens": spec["gen_new"], "greedy": True}
    del model

    # Information only: transformers' own handling of the FP8 folder (GPU: FP8 activations and GEMM;
    # CPU: dequantized at load), compared on the last prompt.
    try:
        device_map = "cuda" if torch.cuda.is_available() else None
        native = transformers.AutoModelForCausalLM.from_pretrained(
            d, attn_implementation="eager", device_map=device_map).eval()
        dev = next(native.parameters()).device
        i = len(spec["lengths"]) - 1
        with torch.no_grad():
            got = native(input_ids=ref[f"prompt.{i}.ids"].long()[None].to(dev)).logits[0].float().cpu()
        want = ref[f"prompt.{i}.logits"]
        meta["transformers_native"] = {
            "device": str(dev), "prompt": i,
            "max_abs_diff": float((got - want).abs().max()), "max_abs_logit": float(want.abs().max()),
            "argmax_agreement": float((got.argmax(-1) == want.argmax(-1)).float().mean())}
        del native
    except Exception as e:  # noqa: BLE001 - information only
        meta["transformers_native"] = {"error": f"{type(e).__name__}: {e}"[:300]}
    print(name, "transformers_native:", meta["transformers_native"])

    save_file(ref, os.path.join(d, "reference.safetensors"))
    json.dump(meta, open(os.path.join(d, "reference.json"), "w"), indent=1)
    sizes = {f: os.path.getsize(os.path.join(d, f)) for f in sorted(os.listdir(d))}
    print(f"== {name}: {len(fp8_tensors)} tensors, {n_fp8} FP8; not converted: {not_converted}; sizes {sizes}")


def main():
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--src", required=True, help="folder holding models/<name>/config.json of the bf16 fixtures")
    ap.add_argument("--out", required=True, help="output folder: <out>/<name>-fp8/")
    ap.add_argument("--only", nargs="*", help="names to make (default: all)")
    a = ap.parse_args()
    torch.set_num_threads(max(1, min(8, os.cpu_count() or 1)))
    print("transformers", transformers.__version__, "torch", torch.__version__)
    os.makedirs(a.out, exist_ok=True)
    with tempfile.TemporaryDirectory() as work:
        for name, spec in SPECS.items():
            if a.only and name not in a.only:
                continue
            make(name, spec, a.src, a.out, work)


if __name__ == "__main__":
    main()
