#!/usr/bin/python3
"""summary.py — medians and ratios of a bench/finetune/run.sh run (called by run.sh).

Reads the JSON lines in $RAW; prints per model the median training images/s and CPU
seconds per step of kerac, PyTorch NCHW and PyTorch channels_last, the ratio of kerac to
the faster PyTorch layout (the median of the per-round ratios, from images/s and from CPU time),
one JSON summary line, and with RECORD=1 appends a row per model to the "Fine-tuning" table
of $RESULTS.
"""
import json
import os
import statistics
import time


def main():
    env = os.environ
    rows = [json.loads(l) for l in open(env["RAW"]) if l.strip()]
    by = {}  # (model, impl) -> [rows] in round order
    for r in rows:
        model = os.path.basename(r["model"]).removesuffix(".keras")
        impl = "kerac" if r["impl"] == "kerac" else "pytorch-" + r["layout"]
        by.setdefault((model, impl), []).append(r)
    models = sorted({m for m, _ in by}, key=lambda m: ["mobilenetv2", "resnet50"].index(m))
    out = {"benchmark": "fine-tuning 96x96 batch 32 cpu", "commit": env["COMMIT"], "rounds": int(env["ROUNDS"]),
           "threads": int(env["THREADS"]), "cpu": env["BENCH_CPU"], "cpu_isa_restriction": env.get("CPU_ISA", "auto"),
           "loadavg_before": float(env["LOAD_BEFORE"]), "loadavg_after": float(env["LOAD_AFTER"]),
           "raw": os.path.relpath(env["RAW"]), "models": {}}
    print(f"{'model':<13}{'impl':<24}{'train img/s':>12}{'cpu s/step':>12}")
    for m in models:
        med = {}
        for impl in ("kerac", "pytorch-nchw", "pytorch-channels_last"):
            rs = by.get((m, impl), [])
            if rs:
                med[impl] = (statistics.median(r["train_images_per_second"] for r in rs),
                             statistics.median(r["cpu_seconds_per_step"] for r in rs))
                print(f"{m:<13}{impl:<24}{med[impl][0]:>12.2f}{med[impl][1]:>12.3f}")
        k, nchw, cl = by[(m, "kerac")], by[(m, "pytorch-nchw")], by[(m, "pytorch-channels_last")]
        per_round = [a["train_images_per_second"] / max(b["train_images_per_second"], c["train_images_per_second"])
                     for a, b, c in zip(k, nchw, cl)]
        # the same from the CPU time per step (all threads): what a loaded machine distorts least
        cpu_round = [min(b["cpu_seconds_per_step"], c["cpu_seconds_per_step"]) / a["cpu_seconds_per_step"]
                     for a, b, c in zip(k, nchw, cl)]
        best = max(("pytorch-nchw", "pytorch-channels_last"), key=lambda i: med[i][0])
        ratio, cpu_ratio = statistics.median(per_round), statistics.median(cpu_round)
        print(f"{m:<13}{'kerac / best PyTorch':<24}{ratio:>12.2f}{cpu_ratio:>12.2f}   (rounds {', '.join(f'{x:.2f}' for x in per_round)};"
              f" best layout by median: {best}; the second figure from CPU time per step)")
        out["models"][m] = {"median": {i: {"train_images_per_second": round(v[0], 2), "cpu_seconds_per_step": round(v[1], 4)}
                                       for i, v in med.items()},
                            "ratio_vs_best_pytorch": round(ratio, 3), "round_ratios": [round(x, 3) for x in per_round],
                            "cpu_time_ratio_vs_best_pytorch": round(cpu_ratio, 3),
                            "kerac_cpu_isa": sorted({r.get("cpu_isa", "?") for r in k}),
                            # what each side reported running (bench/isa_env.sh)
                            "ran": {i: sorted({"/".join(str(r.get(f, "?")) for f in
                                                        (("cpu_isa", "openblas_corename") if i == "kerac" else
                                                         ("onednn_isa", "aten_capability", "openblas_corename")))
                                               for r in by.get((m, i), [])})
                                    for i in ("kerac", "pytorch-nchw", "pytorch-channels_last")}}
    print(json.dumps(out))
    if env.get("RECORD") != "1":
        return
    text = open(env["RESULTS"]).read().split("\n")
    head = next((n for n, l in enumerate(text) if l.startswith("| date | commit | model | rounds |")), None)
    if head is None:
        raise SystemExit(f"summary.py: {env['RESULTS']} has no fine-tuning table to append to")
    at = head + 2
    while at < len(text) and text[at].startswith("|"):
        at += 1
    for m in models:
        d = out["models"][m]
        med = d["median"]
        text.insert(at, f"| {time.strftime('%Y-%m-%d')} | {env['COMMIT']} | {m} | {env['ROUNDS']} "
                        f"| {med['kerac']['train_images_per_second']:.1f} | {med['pytorch-nchw']['train_images_per_second']:.1f} "
                        f"| {med['pytorch-channels_last']['train_images_per_second']:.1f} | {d['ratio_vs_best_pytorch']:.2f} "
                        f"| {env['LOAD_BEFORE']} / {env['LOAD_AFTER']} | {out['cpu']} (kerac {'/'.join(d['kerac_cpu_isa'])}; CPU_ISA={out['cpu_isa_restriction']}: ran {d['ran']}) |")
        at += 1
    with open(env["RESULTS"], "w") as f:
        f.write("\n".join(text))
    print(f"summary.py: appended {len(models)} row(s) to {os.path.relpath(env['RESULTS'])}")


if __name__ == "__main__":
    main()
