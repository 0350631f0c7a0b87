#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""bench/replay.sh's report: from the replay runs' JSON (BUILD/bench/replay/WORKLOAD.POLICY.SEED.json) the
table of the GPU allocation ratio at 90/100/130 % arrived (mean and min-max over the seeds) beside the
published means of the FGD paper's artefact (../shared/specs/cluster-trace.md section 5, copied below),
written into docs/BENCHMARKS.md between <!-- BEGIN replay --> and <!-- END replay -->, and a plot of the
mean curves (docs/replay.png, an SVG rendered by headless Chromium)."""
import argparse
import glob
import json
import os
import platform
import shutil
import subprocess
import sys
import tempfile

POLICIES = ["random", "dotprod", "gpuclustering", "gpupacking", "bestfit", "fgd", "frag"]
NAMES = {"random": "Random", "dotprod": "DotProd", "gpuclustering": "GpuClustering", "gpupacking": "GpuPacking",
         "bestfit": "BestFit", "fgd": "FGD", "frag": "**frag (ours)**"}
WORKLOADS = ["default", "gpushare100", "multigpu50"]
SAMPLED = ["cpuheavy", "gpushare40", "multigpu20", "gpuspec33",  # bench/replay-sample.py
           "cpuheavy1", "gpushare60", "gpushare80", "multigpu30", "gpuspec20"]
# the generalisation protocol: whoever tunes a policy looks at these seeds only; the others are reported held out
TUNING_SEEDS = range(42, 45)
COLUMNS = [90, 100, 130]
# published 10-seed means at 90/100/130 % (cluster-trace.md section 5)
PUBLISHED = {
    "default": {"random": (85.02, 86.30, 87.47), "dotprod": (89.98, 90.62, 90.85),
                "gpuclustering": (89.98, 91.65, 91.88), "gpupacking": (89.98, 91.78, 92.00),
                "bestfit": (89.99, 92.86, 93.08), "fgd": (89.98, 95.23, 95.39)},
    "gpushare100": {"random": (78.21, 78.90, 79.44), "dotprod": (81.84, 81.98, 82.42),
                    "gpuclustering": (82.08, 82.22, 82.65), "gpupacking": (81.99, 82.13, 82.57),
                    "bestfit": (84.47, 84.62, 85.01), "fgd": (86.53, 86.64, 86.90)},
    "multigpu50": {"random": (75.07, 81.28, 90.27), "dotprod": (89.87, 94.73, 94.85),
                   "gpuclustering": (89.85, 95.69, 95.81), "gpupacking": (89.87, 96.06, 96.18),
                   "bestfit": (89.97, 95.62, 95.74), "fgd": (89.93, 97.09, 97.18)},
}
# Random cannot be matched seed for seed (cluster-trace.md section 7): the published 10-seed standard deviation
# of Random at 90/100/130 % (sample sd over seeds 42-51 of the artefact's analysis_allo_discrete.csv), so that
# its mean is compared with ours over many seeds by their standard errors
PUBLISHED_RANDOM_SD = {"default": (0.288, 0.332, 0.319), "gpushare100": (0.189, 0.153, 0.131),
                       "multigpu50": (0.759, 0.828, 0.438)}
PUBLISHED_SEEDS = 10
COLORS = {"random": "#999999", "dotprod": "#8c564b", "gpuclustering": "#9467bd", "gpupacking": "#17becf",
          "bestfit": "#1f77b4", "fgd": "#ff7f0e", "frag": "#d62728"}


def load(runs):
    data = {}
    for path in sorted(glob.glob(os.path.join(runs, "*.json"))):
        w, p, _ = os.path.basename(path).split(".", 2)
        with open(path) as f:
            data.setdefault((w, p), []).append(json.load(f))
    return data


def cell(rs, x):
    v = [r["curve"][x]["allocated"] for r in rs]
    return sum(v) / len(v), min(v), max(v)


def mean_se(v):
    """The mean of v and its standard error (sample sd / sqrt(n))."""
    m = sum(v) / len(v)
    sd = (sum((x - m) ** 2 for x in v) / (len(v) - 1)) ** 0.5 if len(v) > 1 else float("nan")
    return m, sd / len(v) ** 0.5


def random_many(data, many):
    """Random against the published mean by standard errors: ours over the many seeds (bench/replay.sh's
    random-many runs plus the 10 seeds of the tables), the published over its 10 seeds."""
    ws = [w for w in WORKLOADS if many.get((w, "random"))]
    if not ws:
        return []
    n = min(len(many[(w, "random")]) for w in ws)
    seeds = sorted({r["seed"] for r in many[(ws[0], "random")]})
    out = ["**Random, statistically** (it cannot be matched seed for seed: the published simulator draws an "
           "index into a feasible-node list ordered by a parallel filter, ../shared/specs/cluster-trace.md "
           "section 7). Our Random over %d seeds (%d-%d) against the published 10-seed mean, at 90 / 100 / 130 %% "
           "arrived: mean +- standard error (the published one from its per-seed standard deviation); z = the "
           "difference over the combined standard error (|z| < 2: no evidence of a difference at about 95 %%)."
           % (n, seeds[0], seeds[-1]), "",
           "| workload | ours, seeds 42-51 | ours, %d seeds | published, 10 seeds | ours - published (z) |" % n,
           "|---|---|---|---|---|"]
    for w in ws:
        rs = many[(w, "random")]
        ten = data.get((w, "random"), [])
        c_ten = " / ".join("%.2f" % cell(ten, x)[0] for x in COLUMNS) if ten else "-"
        ours, pub, diff = [], [], []
        for i, x in enumerate(COLUMNS):
            m, se = mean_se([r["curve"][x]["allocated"] for r in rs])
            pm, pse = PUBLISHED[w]["random"][i], PUBLISHED_RANDOM_SD[w][i] / PUBLISHED_SEEDS ** 0.5
            ours.append("%.2f +- %.2f" % (m, se))
            pub.append("%.2f +- %.2f" % (pm, pse))
            diff.append("%+.2f (%+.1f)" % (m - pm, (m - pm) / (se * se + pse * pse) ** 0.5))
        out.append("| %s | %s | %s | %s | %s |" % (w, c_ten, " / ".join(ours), " / ".join(pub), " / ".join(diff)))
    out.append("")
    return out


def held_out(rs, tuning):
    """The runs on the tuning seeds (tuning True) or on the others."""
    return [r for r in rs if (r["seed"] in TUNING_SEEDS) == tuning]


def generalisation(data):
    """frag minus our FGD replay per workload, held-out seeds first, and the workloads where frag is below."""
    ws = [w for w in WORKLOADS + SAMPLED if data.get((w, "frag")) and data.get((w, "fgd"))]
    rows, below, below90 = [], [], []
    for w in ws:
        d = {}
        for tuning in (False, True):
            fr, fg = held_out(data[(w, "frag")], tuning), held_out(data[(w, "fgd")], tuning)
            d[tuning] = [cell(fr, x)[0] - cell(fg, x)[0] for x in COLUMNS] if fr and fg else None
        if not d[False]:
            continue
        ho = held_out(data[(w, "frag")], False)
        fg = held_out(data[(w, "fgd")], False)
        if d[False][1] < 0 or d[False][2] < 0:
            below.append(w)
        if d[False][0] < 0:
            below90.append(w)
        rows.append("| %s | %s | %s | %s | %s |" % (
            w, " / ".join("%.2f" % cell(fg, x)[0] for x in COLUMNS), " / ".join("%.2f" % cell(ho, x)[0] for x in COLUMNS),
            " / ".join("%+.2f" % v for v in d[False]),
            " / ".join("%+.2f" % v for v in d[True]) if d[True] else "-"))
    if not rows:
        return []
    n_ho = len({r["seed"] for r in held_out(data[(ws[0], "frag")], False)})
    out = ["**Generalisation: held-out seeds** (the protocol for changing `frag`, docs/scheduler.md: a change is "
           "judged on the tuning seeds 42-44 of every workload here, kept only if it loses on none, then "
           "confirmed on the held-out seeds). frag against our FGD replay at 90 / 100 / 130 %% arrived, means "
           "over the %d held-out seeds (45-51), and the same difference on the tuning seeds." % n_ho, "",
           "| workload | FGD, held out | frag, held out | frag - FGD, held out | frag - FGD, tuning seeds |",
           "|---|---|---|---|---|"] + rows + [""]
    out.append("On the held-out seeds frag is below FGD at 100 or 130 %% arrived on **%d of %d** workloads%s, "
               "and at 90 %% on %d%s." % (len(below), len(rows), " (%s)" % ", ".join(below) if below else "",
                                          len(below90), " (%s)" % ", ".join(below90) if below90 else ""))
    out.append("")
    return out


def section(data, a, many=None):
    cpu = "unknown"
    with open("/proc/cpuinfo") as f:
        for line in f:
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    n_seeds = max(len(v) for v in data.values())
    t = a.time.split()
    out = ["<!-- BEGIN replay -->", "## Cluster packing: `gpuslice replay` of the openb trace", "",
           "Written by `bench/replay.sh BUILD TRACE_DIR` (`make bench-replay TRACE=../shared/data/openb`): "
           "every policy x workload x seeds 42-%d, tune 1.3, our own random stream (docs/scheduler.md). "
           "GPU allocation ratio (%%) at 90/100/130 %% of the cluster's GPU capacity arrived: mean over the %d "
           "seeds, min-max in parentheses; *published*: the FGD paper's 10-seed mean "
           "(Go's generator: compare means, not seeds)." % (41 + n_seeds, n_seeds), "",
           "Commit %s; %s, %d cores (%s); load average %s at the start, %s at the end. One full run "
           "(`gpuslice replay ... --policy frag`, default workload, seed 42): %s s wall, %s s user." %
           (a.commit, cpu, os.cpu_count(), platform.machine(), a.load_start, a.load_end,
            t[0] if t else "?", t[1] if len(t) > 1 else "?"), ""]
    for w in WORKLOADS:
        out += ["**%s**" % w, "", "| policy | @90 % | @100 % | @130 % | published @90/100/130 |",
                "|---|---|---|---|---|"]
        for p in POLICIES:
            rs = data.get((w, p))
            if not rs:
                continue
            cells = ["%.2f (%.2f-%.2f)" % cell(rs, x) for x in COLUMNS]
            pub = PUBLISHED[w].get(p)
            out.append("| %s | %s | %s |" % (NAMES[p], " | ".join(cells),
                                             " / ".join("%.2f" % v for v in pub) if pub else "-"))
        out.append("")
    out += random_many(data, many or {})
    gains = []
    for w in WORKLOADS:
        for i, x in enumerate(COLUMNS[1:], 1):
            if data.get((w, "frag")):
                gains.append(cell(data[(w, "frag")], x)[0] - PUBLISHED[w]["fgd"][i])
    if gains:
        out.append("frag minus FGD's published mean at 100 and 130 %%, over the three workloads: "
                   "%s; on average %+.2f points." % (", ".join("%+.2f" % g for g in gains),
                                                     sum(gains) / len(gains)))
        out.append("")
    sampled = [w for w in SAMPLED if data.get((w, "frag"))]
    if sampled:
        out += ["**Workloads sampled from the same trace** (bench/replay-sample.py; no published numbers): "
                "at 100 / 130 %% arrived, mean (min-max) over the %d seeds." % n_seeds, "",
                "| workload | BestFit | FGD | frag (ours) | frag - FGD |", "|---|---|---|---|---|"]
        for w in sampled:
            cells, means = [], {}
            for p in ["bestfit", "fgd", "frag"]:
                rs = data.get((w, p))
                if not rs:
                    cells.append("-")
                    continue
                c = [cell(rs, x) for x in COLUMNS[1:]]
                means[p] = [m for m, _, _ in c]
                cells.append(" / ".join("%.2f (%.2f-%.2f)" % v for v in c))
            diff = " / ".join("%+.2f" % (a - b) for a, b in zip(means.get("frag", []), means.get("fgd", [])))
            out.append("| %s | %s | %s |" % (w, " | ".join(cells), diff or "-"))
        out.append("")
    out += generalisation(data)
    gpuonly = [w for w in WORKLOADS if data.get((w, "frag-gpuonly"))]
    if gpuonly:
        out += ["**The extender registered for GPU pods only** (`--gpu-pods-only`: CPU-only pods placed by "
                "kube-scheduler's default scoring, LeastAllocated + BalancedAllocation): at 100 / 130 %% arrived, "
                "mean (min-max) over the %d seeds, beside the same policy placing every pod (above)." % n_seeds, "",
                "| workload | FGD | frag (ours) | frag, every pod |", "|---|---|---|---|"]
        for w in gpuonly:
            cells = []
            for p in ["fgd-gpuonly", "frag-gpuonly", "frag"]:
                rs = data.get((w, p))
                cells.append(" / ".join("%.2f (%.2f-%.2f)" % cell(rs, x) for x in COLUMNS[1:]) if rs else "-")
            out.append("| %s | %s |" % (w, " | ".join(cells)))
        out.append("")
    out += ["![allocation ratio against arrived load, one line per policy](replay.png)", "", "<!-- END replay -->"]
    return "\n".join(out) + "\n"


def write_doc(path, text):
    doc = open(path).read() if os.path.exists(path) else ""
    b, e = doc.find("<!-- BEGIN replay -->"), doc.find("<!-- END replay -->")
    if b >= 0 and e > b:
        doc = doc[:b] + text + doc[e + len("<!-- END replay -->") + 1:]
    else:
        doc = doc.rstrip("\n") + "\n\n" + text
    with open(path, "w") as f:
        f.write(doc)


def svg(data):
    W, H, pw = 1260, 440, 400
    x0, x1, y0, y1 = 60, 130, 60, 100
    parts = ['<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" font-family="sans-serif" '
             'font-size="12"><rect width="100%%" height="100%%" fill="white"/>' % (W, H)]
    for k, w in enumerate(WORKLOADS):
        ox, oy, ph = 50 + k * (pw + 20), 30, 330
        sx = lambda x: ox + (x - x0) / (x1 - x0) * (pw - 40)
        sy = lambda y: oy + ph - (y - y0) / (y1 - y0) * ph
        parts.append('<text x="%d" y="20" font-weight="bold">%s</text>' % (ox, w))
        for y in range(y0, y1 + 1, 10):
            parts.append('<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="#ddd"/>'
                         '<text x="%.1f" y="%.1f" text-anchor="end">%d</text>' %
                         (sx(x0), sy(y), sx(x1), sy(y), sx(x0) - 4, sy(y) + 4, y))
        for x in range(x0, x1 + 1, 10):
            parts.append('<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="#ddd"/>'
                         '<text x="%.1f" y="%.1f" text-anchor="middle">%d</text>' %
                         (sx(x), sy(y0), sx(x), sy(y1), sx(x), sy(y0) + 16, x))
        parts.append('<text x="%.1f" y="%.1f" text-anchor="middle">arrived (%% of GPU capacity)</text>' %
                     (sx((x0 + x1) / 2), sy(y0) + 32))
        if k == 0:
            parts.append('<text x="14" y="%.1f" transform="rotate(-90 14 %.1f)" text-anchor="middle">'
                         'allocated (%%)</text>' % (sy(80), sy(80)))
        for p in POLICIES:
            rs = data.get((w, p))
            if not rs:
                continue
            pts = " ".join("%.1f,%.1f" % (sx(x), sy(max(y0, cell(rs, x)[0])))
                           for x in range(x0, min(x1, len(rs[0]["curve"]) - 1) + 1))
            parts.append('<polyline fill="none" stroke="%s" stroke-width="%s" points="%s"/>' %
                         (COLORS[p], 2.5 if p == "frag" else 1.5, pts))
    for i, p in enumerate(POLICIES):
        lx = 60 + i * 170
        parts.append('<line x1="%d" y1="420" x2="%d" y2="420" stroke="%s" stroke-width="3"/>'
                     '<text x="%d" y="424">%s</text>' % (lx, lx + 24, COLORS[p], lx + 30, NAMES[p].strip("*")))
    parts.append("</svg>")
    return "\n".join(parts), W, H


def write_png(data, path):
    text, w, h = svg(data)
    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    if not chromium:
        print("replay-report: no chromium: %s not rewritten" % path, file=sys.stderr)
        return
    with tempfile.TemporaryDirectory() as d:
        src = os.path.join(d, "plot.svg")
        with open(src, "w") as f:
            f.write(text)
        png = os.path.join(d, "plot.png")
        subprocess.run([chromium, "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars",
                        "--user-data-dir=" + os.path.join(d, "profile"), "--window-size=%d,%d" % (w, h),
                        "--screenshot=" + png, "file://" + src], check=True, capture_output=True, timeout=120)
        shutil.copyfile(png, path)


def main():
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--runs", required=True)
    ap.add_argument("--doc", required=True, action="append", help="a Markdown file to write the section into "
                    "(repeatable; the section replaces the one between the markers, or is appended)")
    ap.add_argument("--png", required=True)
    ap.add_argument("--commit", default="?")
    ap.add_argument("--load-start", default="?")
    ap.add_argument("--load-end", default="?")
    ap.add_argument("--time", default="")
    ap.add_argument("--random-runs", help="Random's runs over many seeds (WORKLOAD.random.SEED.json), compared "
                    "with the published mean by standard errors")
    a = ap.parse_args()
    data = load(a.runs)
    if not data:
        sys.exit("replay-report: no runs in %s" % a.runs)
    many = {}
    if a.random_runs:
        many = load(a.random_runs)
        for key, rs in data.items():  # the tables' seeds count too
            if key[1] == "random" and key in many:
                seen = {r["seed"] for r in many[key]}
                many[key] += [r for r in rs if r["seed"] not in seen]
    text = section(data, a, many)
    for doc in a.doc:
        write_doc(doc, text)
    write_png(data, a.png)
    # stdout: the body without its markers and title, for bench/section.py (docs/BENCHMARKS.md's section)
    body = text.split("\n")[2:]
    while body and body[-1] in ("", "<!-- END replay -->"):
        body.pop()
    sys.stdout.write("\n".join(body) + "\n")


if __name__ == "__main__":
    main()
