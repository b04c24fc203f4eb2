"""Summarises bench/cuda/ab_run.sh's output: one row per measurement, base and test side by side.

Reads the rounds ("== round N: SIDE": base, test, and the more1, more2, ... of ab_run.sh's AB_MORE) and in them the decode steps of `infernix bench` (GPU busy and
step time per step, and tokens/s, for each model line (with its KV cache type where that is not the
activations', so that runs differing only in --kv-cache-dtype stay apart, and "greedy", "sample" or
"host-sample" for bench --greedy, --sample or --host-sample, with "sync" for --sync-picks), test name and batch; with --depth the depth), the
chains and passes of gemv_bench (us) and trace_summary.py's table (the step span, and each kernel's cost
per step, us). Prints, per row, each round's values and the ratio of the
medians (test / base: below 1 is faster for times, above 1 for tokens/s). --test SIDE compares another side
with the base instead of the test tree's (the other sides' lines are left out).

  python3 bench/cuda/ab_summary.py [--test SIDE] AB_OUTPUT
"""
import re
import statistics
import sys

ROUND = re.compile(r"^== round (\d+): (\w+)")
MODEL = re.compile(r"^model: (\S+), (\d+) layers.*\(dummy (\S+) weights\)(?:.*; KV cache (\w+))?")
BUSY = re.compile(r"^(tg\d+) batch (\d+): .*GPU busy ([\d.]+) ms of ([\d.]+) ms per step")
PREFILLED = re.compile(r"^tg\d+ batch \d+: context of (\d+) tokens prefilled")
TOKS = re.compile(r"^\| (tg\d+(?: @ d\d+)?|pp\d+) \| (\d+) \| ([\d.]+) \|")
GEMV_HEAD = re.compile(r"^device: .*; (\d+) layers of (\S+) weights")
GEMV_ROW = re.compile(r"^\| (\d+) \| ([^|]+?) \| ([\d.]+) \|")
TRACE_HEAD = re.compile(r"^(\d+) steps of (\d+) kernels .*span per step ([\d.]+) us")
TRACE_ROW = re.compile(r"^(\S.*?)\s+([\d.]+)\s+([\d.]+)\s+([\d.]+)\s+([\d.]+)(?:\s+([\d.]+))?$")


def parse(lines, test="test"):
    """{key: {"base": [values by round], "test": [...]}} (test: the side named so), keys in first-seen order."""
    rows = {}
    side = None
    model = gemv = ""
    trace = False  # in trace_summary.py's table
    depth = ""  # of the next decode steps: the bench says it in a line of its own before them
    for line in lines:
        line = line.rstrip("\n")
        m = ROUND.match(line)
        if m:
            side = "base" if m.group(2) == "base" else "test" if m.group(2) == test else None
            model = gemv = ""
            continue
        if side is None:
            continue

        def add(key, value):
            rows.setdefault(key, {"base": [], "test": []})[side].append(value)

        if m := TRACE_HEAD.match(line):
            add((f"trace {model} span per step", "us"), float(m.group(3)))
            trace = True
            continue
        if trace:
            if line.startswith("kernel "):
                continue
            if m := TRACE_ROW.match(line):
                add((f"trace {m.group(1)}", "us / step"), float(m.group(3)))
                continue
            trace = False
        if m := MODEL.match(line):
            # The KV cache's type where it is not the activations' (runs that differ only in it are apart).
            kv = f" kv {m.group(4)}" if m.group(4) and m.group(4) not in ("bf16", "f32", "f16") else ""
            # How the steps use their logits (bench's header: --greedy, --sample, --host-sample), and " sync"
            # for --sync-picks (each step queued after the picks before it are read)
            picks = (" greedy" if "; greedy picks" in line else " sample" if "; draws (" in line else
                     " host-sample" if "; the logits read back and sampled" in line else "")
            if picks and "each step queued after" in line:
                picks += " sync"
            # States sized by --ctx-size (the CUDA decode attention's splits follow them)
            ctx = re.search(r", states of (\d+) tokens", line)
            ctx = f" ctx {ctx.group(1)}" if ctx else ""
            model, gemv = f"{m.group(1)} {m.group(2)}L {m.group(3)}{kv}{ctx}{picks}", ""
        elif m := GEMV_HEAD.match(line):
            gemv, model = f"gemv {m.group(2)} x{m.group(1)}", ""
        elif m := PREFILLED.match(line):
            depth = f" @ d{m.group(1)}"
        elif m := BUSY.match(line):
            what = f"{model} {m.group(1)}{depth} b{m.group(2)}"
            depth = ""
            add((what, "GPU busy ms"), float(m.group(3)))
            add((what, "step ms"), float(m.group(4)))
        elif (m := TOKS.match(line)) and model:
            add((f"{model} {m.group(1)} b{m.group(2)}", "tok/s"), float(m.group(3)))
        elif (m := GEMV_ROW.match(line)) and gemv:
            add((f"{gemv} {m.group(2).strip()} n{m.group(1)}", "us"), float(m.group(3)))
    return rows


def main():
    args = sys.argv[1:]
    test = "test"
    if len(args) == 3 and args[0] == "--test":
        test, args = args[1], args[2:]
    if len(args) != 1:
        sys.exit("usage: ab_summary.py [--test SIDE] AB_OUTPUT")
    with open(args[0]) as f:
        rows = parse(f, test)
    if not rows:
        print("ab_summary: no rounds found")
        return
    print(f"{'measurement':58s} {'unit':11s} {'base':>21s} {test:>21s} {test[:4] + '/base':>9s}")
    for (what, unit), v in rows.items():
        b, t = v["base"], v["test"]
        ratio = (f"{statistics.median(t) / statistics.median(b):9.3f}"
                 if b and t and statistics.median(b) else f"{'':9s}")
        fmt = lambda xs: " ".join(f"{x:.3f}" if x < 100 else f"{x:.1f}" for x in xs)
        print(f"{what[:58]:58s} {unit:11s} {fmt(b):>21s} {fmt(t):>21s} {ratio}")


if __name__ == "__main__":
    main()
