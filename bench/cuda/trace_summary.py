"""What each kernel costs a decode step, from bench/cuda/kernel_trace.cpp's CSV (device_run.sh `trace`).

The kernels are split into bursts wherever the GPU idles longer than --gap microseconds (the host's time
between decode steps); the bursts with the most common kernel count among the long ones are the decode
steps (--last: the count of the last long burst, for runs whose prefill of a long context (-d) leaves more
bursts of one count than there are decode steps; --count N: that count), of which the first --skip are
dropped (warm-up). Bursts of nothing but the dummy weights' fill kernels never count. A burst is also
cut before every launch of kernel --split (default FeedTokensKernel, the first kernel of a pipelined step;
--split '' turns it off): greedy picks on the device queue the next step before the host reads a token, so
those steps follow each other with no idle gap and one burst holds several. Within a step, a kernel's
cost is how much later it ends than every kernel before it (with programmatic launches it starts while the
previous one runs, so its duration overstates it): the costs of a step add up to its span; its lead is how
long before the kernels before it ended it started (its first block resident: with a programmatic launch,
the time its blocks had for the work before their wait, such as a GEMV's first weight copies; 0 for a
kernel that started after them). Printed per kernel name: launches, cost and duration per step
(microseconds), the cost and the lead per launch, and the span of a step.

    python3 bench/cuda/trace_summary.py trace.csv [--gap 20] [--skip 2] [--top 30] [--min 8] [--order] [--longest]
        [--last | --count N] [--split NAME]

--min sets how many kernels a burst needs to count as long (raise it past the loading's bursts, e.g. the
dummy FP8 weights' three kernels per tensor, when those outnumber the decode steps).

--order lists the kernels of the last step in order instead (position, name, start after the step's
first start, duration, cost). --longest takes the one burst with the longest span instead of the decode
steps (a prefill: the bench's pp test).
"""
import argparse
import collections
import csv
import statistics
import sys


def short_name(name):
    """The kernel's name without its return type, namespaces and parameter list (templates kept)."""
    name = name.replace("(anonymous namespace)::", "").replace("infernix::cuda::", "")
    name = name.split("(")[0]
    if name.startswith("void "):
        name = name[5:]
    return name[:70]


def read_kernels(path):
    with open(path, newline="") as f:
        rows = [(int(r["start_ns"]), int(r["end_ns"]), short_name(r["name"])) for r in csv.DictReader(f)]
    rows.sort()
    return rows


def bursts(kernels, gap_ns):
    out, last_end = [], None
    for k in kernels:
        if last_end is None or k[0] - last_end > gap_ns:
            out.append([])
            last_end = k[1]
        out[-1].append(k)
        last_end = max(last_end, k[1])
    return out


def split_at(bursts_in, first):
    """Each burst cut before every kernel whose name starts with `first` (a step's first kernel)."""
    out = []
    for b in bursts_in:
        out.append([])
        for k in b:
            if k[2].startswith(first) and out[-1]:
                out.append([])
            out[-1].append(k)
    return out


def is_fill(burst):
    """A burst of the dummy weights' fill kernels only (made at load, never part of a step)."""
    return all(name.startswith("Dummy") for _, _, name in burst)


def span(burst):
    return max(k[1] for k in burst) - burst[0][0]


def costs(step):
    """(name, start, duration, cost, lead) per kernel of a step, in ns."""
    out, end_so_far = [], step[0][0]  # the kernels are in start order: the first costs its duration
    for start, end, name in step:
        out.append((name, start, end - start, max(0, end - end_so_far), max(0, end_so_far - start)))
        end_so_far = max(end_so_far, end)
    return out


def main(argv):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("csv")
    ap.add_argument("--gap", type=float, default=20.0, help="idle microseconds that end a burst")
    ap.add_argument("--skip", type=int, default=2, help="decode steps dropped at the start")
    ap.add_argument("--top", type=int, default=30)
    ap.add_argument("--min", type=int, default=8, help="kernels a burst needs to count as long")
    ap.add_argument("--order", action="store_true", help="the last step's kernels in order")
    ap.add_argument("--longest", action="store_true", help="the burst with the longest span (a prefill)")
    pick = ap.add_mutually_exclusive_group()
    pick.add_argument("--last", action="store_true", help="decode steps: the kernel count of the last long burst")
    pick.add_argument("--count", type=int, help="decode steps: bursts of this many kernels")
    ap.add_argument("--split", metavar="NAME", default="FeedTokensKernel",
                    help="also cut before every launch of this kernel (a step's first; '' for none)")
    a = ap.parse_args(argv)
    all_bursts = bursts(read_kernels(a.csv), a.gap * 1e3)
    if a.split:
        all_bursts = split_at(all_bursts, a.split)
    long_ones = [b for b in all_bursts if len(b) >= a.min and not is_fill(b)]
    if not long_ones:
        sys.exit(f"{a.csv}: no burst of {a.min} kernels or more")
    if a.longest:
        steps = [max(long_ones, key=span)]
        count = len(steps[0])
    else:
        count = (a.count if a.count is not None else len(long_ones[-1]) if a.last else
                 collections.Counter(len(b) for b in long_ones).most_common(1)[0][0])
        steps = [b for b in long_ones if len(b) == count][a.skip:]
    if not steps:
        sys.exit(f"{a.csv}: no decode steps left after skipping {a.skip}")
    spans = [span(s) for s in steps]
    print(f"{len(steps)} steps of {count} kernels (of {len(all_bursts)} bursts); span per step "
          f"{statistics.mean(spans) / 1e3:.1f} us (min {min(spans) / 1e3:.1f}, max {max(spans) / 1e3:.1f})")
    if a.order:
        t0 = steps[-1][0][0]
        print(f"{'#':>4s}  {'kernel':70s} {'start us':>9s} {'dur us':>8s} {'cost us':>8s} {'lead us':>8s}")
        for i, (name, start, dur, cost, lead) in enumerate(costs(steps[-1])):
            print(f"{i:4d}  {name:70s} {(start - t0) / 1e3:9.2f} {dur / 1e3:8.2f} {cost / 1e3:8.2f} "
                  f"{lead / 1e3:8.2f}")
        return
    # launches, cost, duration, lead (summed over steps)
    per = collections.defaultdict(lambda: [0, 0.0, 0.0, 0.0])
    for s in steps:
        for name, _, dur, cost, lead in costs(s):
            per[name][0] += 1
            per[name][1] += cost
            per[name][2] += dur
            per[name][3] += lead
    n = len(steps)
    print(f"{'kernel':70s} {'per step':>8s} {'cost us':>9s} {'dur us':>9s} {'cost/launch':>11s} {'lead/launch':>11s}")
    for name, (launches, cost, dur, lead) in sorted(per.items(), key=lambda kv: -kv[1][1])[: a.top]:
        print(f"{name:70s} {launches / n:8.1f} {cost / n / 1e3:9.1f} {dur / n / 1e3:9.1f} "
              f"{cost / launches / 1e3:11.2f} {lead / launches / 1e3:11.2f}")


if __name__ == "__main__":
    main(sys.argv[1:])
