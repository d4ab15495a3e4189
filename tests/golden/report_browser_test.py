#!/usr/bin/env python3
"""The HTML report as a person sees it: renders the report of a golden run, a 3-run comparison,
a plan and a capacity search, opens each in headless Chromium, and checks that

  * Chromium logs no console message (a script error, a resource that failed to load),
  * the report references nothing outside the file (one inline script, no http(s) resource),
  * every chart has its marks in the DOM Chromium built (CDF paths, SLO lines, legend entries,
    time series, KV use per instance, batch-size and tokens-per-iteration distributions, TTFT vs
    prompt length, Pareto frontiers of cost vs capacity and of tokens/s per user vs per GPU, the
    chosen config, cost per million output tokens, capacity bisection probes, latency and SLO
    attainment vs offered load with the SLO lines and the capacity marked),
  * hovering works: opened as report.html#hover-selftest, the page's script hovers the first mark
    of every chart and the tooltip shows its values for each (body[data-hover-check] = "N/N"),
    and marks carry <title> tooltips,
  * the screenshot is not blank (a real PNG, many colours, not one flat colour).

Usage: report_browser_test.py SERVESIM_BIN [--update-screenshots DIR]
SERVESIM_SKIP_BROWSER_TEST=1 skips it (exit code 77) where no browser can run; without it a
missing Chromium is a failure (`make deps` installs it).
"""
import os
import re
import shutil
import struct
import subprocess
import sys
import tempfile
import zlib

SKIP = 77


def fail(msg):
    print("FAIL: " + msg)
    sys.exit(1)


def check(cond, msg):
    if not cond:
        fail(msg)
    print("ok   " + msg)


def run(cmd, **kw):
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=kw.pop("timeout", 300), **kw)
    if r.returncode != 0:
        fail("command failed (%d): %s\nstdout:\n%s\nstderr:\n%s" % (r.returncode, " ".join(cmd), r.stdout, r.stderr))
    return r


def find_chromium():
    for name in ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable"):
        path = shutil.which(name)
        if path:
            return path
    return None


def png_pixels(path):
    """Decodes an 8-bit RGB or RGBA, non-interlaced PNG: (width, height, rows of bytes, channels)."""
    data = open(path, "rb").read()
    if data[:8] != b"\x89PNG\r\n\x1a\n":
        fail(path + " is not a PNG")
    pos, idat, width = 8, b"", None
    while pos < len(data):
        (length,) = struct.unpack(">I", data[pos:pos + 4])
        kind = data[pos + 4:pos + 8]
        body = data[pos + 8:pos + 8 + length]
        if kind == b"IHDR":
            width, height, depth, ctype, _, _, interlace = struct.unpack(">IIBBBBB", body)
            if depth != 8 or ctype not in (2, 6) or interlace != 0:
                fail("%s: unsupported PNG (depth %d, colour type %d, interlace %d)" % (path, depth, ctype, interlace))
            channels = 3 if ctype == 2 else 4
        elif kind == b"IDAT":
            idat += body
        pos += 12 + length
    raw = zlib.decompress(idat)
    stride = width * channels
    rows, prev = [], bytearray(stride)
    for y in range(height):
        f = raw[y * (stride + 1)]
        line = bytearray(raw[y * (stride + 1) + 1:(y + 1) * (stride + 1)])
        for i in range(stride):
            a = line[i - channels] if i >= channels else 0
            b = prev[i]
            c = prev[i - channels] if i >= channels else 0
            if f == 1:
                line[i] = (line[i] + a) & 255
            elif f == 2:
                line[i] = (line[i] + b) & 255
            elif f == 3:
                line[i] = (line[i] + (a + b) // 2) & 255
            elif f == 4:
                p = a + b - c
                pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
                line[i] = (line[i] + (a if pa <= pb and pa <= pc else b if pb <= pc else c)) & 255
        rows.append(bytes(line))
        prev = line
    return width, height, rows, channels


def check_screenshot(path, name):
    size = os.path.getsize(path)
    check(size > 20000, "%s screenshot is %d bytes (> 20000)" % (name, size))
    w, h, rows, ch = png_pixels(path)
    colours = set()
    non_background = 0
    for y in range(0, h, 3):
        row = rows[y]
        for x in range(0, w, 3):
            px = row[x * ch:x * ch + 3]
            colours.add(px)
            if px not in (b"\xff\xff\xff", b"\xf6\xf7\xf9"):
                non_background += 1
    check(len(colours) > 50, "%s screenshot has %d distinct colours (> 50)" % (name, len(colours)))
    check(non_background > 2000, "%s screenshot has %d sampled non-background pixels" % (name, non_background))


def browse(chromium, html, workdir, name, shots):
    url = "file://" + os.path.abspath(html)
    common = [chromium, "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars",
              "--no-first-run", "--disable-extensions", "--disable-dev-shm-usage", "--user-data-dir=" + os.path.join(workdir, "profile-" + name),
              "--enable-logging=stderr", "--v=0", "--window-size=1366,900"]
    dom = run(common + ["--dump-dom", url], timeout=120)
    console = [l for l in dom.stderr.splitlines() if "CONSOLE" in l or "Uncaught" in l]
    check(not console, "%s: no console messages while loading (%s)" % (name, "; ".join(console[:3])))
    # Hovering: the page's script hovers the first mark of every chart and counts the tooltips.
    hover = run(common + ["--dump-dom", url + "#hover-selftest"], timeout=120)
    console = [l for l in hover.stderr.splitlines() if "CONSOLE" in l or "Uncaught" in l]
    check(not console, "%s: no console messages while hovering (%s)" % (name, "; ".join(console[:3])))
    n = len(charts(dom.stdout))
    m = re.search(r'data-hover-check="(\d+)/(\d+)"', hover.stdout)
    check(m is not None and int(m.group(1)) == int(m.group(2)) == n,
          "%s: hovering shows a tooltip on each of the %d charts (%s)" % (name, n, m.group(0) if m else "no result"))
    tip = re.search(r'<div id="chart-tooltip"[^>]*>(.*?)</div></div>', hover.stdout, re.S)
    check(tip is not None and "<b>" in tip.group(1) and ": " in tip.group(1),
          "%s: the tooltip names the series and its x and y values" % name)
    png = os.path.join(workdir, name + ".png")
    shot = run(common + ["--screenshot=" + png, url], timeout=120)
    console = [l for l in shot.stderr.splitlines() if "CONSOLE" in l or "Uncaught" in l]
    check(not console, "%s: no console messages while taking the screenshot" % name)
    check(os.path.exists(png), "%s: screenshot written" % name)
    check_screenshot(png, name)
    if shots:
        shutil.copy(png, os.path.join(shots, "report_" + name + ".png"))
    return dom.stdout


def charts(dom):
    """{chart id: its SVG markup} from the dumped DOM."""
    out = {}
    for m in re.finditer(r'<svg[^>]*data-chart="([^"]+)"[^>]*>(.*?)</svg>', dom, re.S):
        out[m.group(1)] = m.group(0)
    return out


def count(pattern, text):
    return len(re.findall(pattern, text))


def check_self_contained(html_path, name):
    text = open(html_path, encoding="utf-8").read()
    scripts = re.findall(r"<script([^>]*)>", text)
    check(scripts == [""], "%s: one inline script and no other (%s)" % (name, scripts))
    external = re.findall(r'(?:src|href)\s*=\s*"(?!#)[^"]*"', text) + re.findall(r"url\((?!#)", text)
    check(not external, "%s: no external resource (%s)" % (name, external[:3]))
    return text


def main():
    if os.environ.get("SERVESIM_SKIP_BROWSER_TEST") == "1":
        print("SKIPPED: SERVESIM_SKIP_BROWSER_TEST=1 (the report browser test needs Chromium)")
        return SKIP
    args = sys.argv[1:]
    if not args:
        fail("usage: report_browser_test.py SERVESIM_BIN [--update-screenshots DIR]")
    binary = os.path.abspath(args[0])
    shots = None
    if "--update-screenshots" in args:
        shots = os.path.abspath(args[args.index("--update-screenshots") + 1])
    chromium = find_chromium()
    if not chromium:
        fail("chromium not found: install it (make deps does; Debian package 'chromium') or set "
             "SERVESIM_SKIP_BROWSER_TEST=1 to skip this test")
    workdir = tempfile.mkdtemp(prefix="servesim-report-test-")
    try:
        db = os.path.join(workdir, "results.db")
        golden = "tests/golden/scenarios/quickstart/scenario.json"
        run([binary, "run", golden, "--db", db])
        run([binary, "run", golden, "--set", "cluster.instances=1", "--db", db])
        run([binary, "run", "tests/golden/scenarios/disagg_1p1d_layerwise/scenario.json", "--db", db])
        run([binary, "plan", "tests/golden/plans/small.plan.json", "--jobs", "2", "--db", db], timeout=600)

        # One run.
        html = os.path.join(workdir, "run.html")
        out = run([binary, "report", db, "--run", "1", "-o", html]).stdout
        check("report" in out and os.path.getsize(html) > 0, "report of run 1 written")
        check_self_contained(html, "run")
        dom = browse(chromium, html, workdir, "run", shots)
        c = charts(dom)
        cdfs = [k for k in c if "-cdf-" in k]
        check(len(cdfs) == 5, "run: 5 latency CDF charts (%s)" % cdfs)
        for k in cdfs:
            paths = re.findall(r'<path class="series"[^>]*data-points="(\d+)"', c[k])
            check(len(paths) == 1 and int(paths[0]) >= 10, "run: %s has one CDF path of >= 10 points" % k)
        for k, label in (("run1-cdf-ttft", "TTFT SLO"), ("run1-cdf-tpot", "TPOT SLO"), ("run1-cdf-tbt", "TBT p99 SLO")):
            check(count(r'class="marker"[^>]*data-marker="%s' % label, c[k]) == 1, "run: %s draws its SLO line" % k)
        for k in ("run1-ts-throughput", "run1-ts-queue", "run1-ts-running", "run1-ts-kv", "run1-ts-preemptions"):
            check(k in c and count(r'<path class="series"', c[k]) >= 1, "run: time series %s drawn" % k)
        check(count(r'class="legend-entry"', c["run1-ts-kv"]) == 2, "run: KV use has one legend entry per instance (2)")
        check(count(r'<path class="series"[^>]*data-series="instance \d"', c["run1-ts-kv"]) == 2, "run: KV use drawn per instance over time")
        for k, what in (("run1-batch-size", "batch size"), ("run1-batch-tokens", "tokens per iteration")):
            check(k in c and count(r'<rect class="bar" data-series="all instances"', c[k]) >= 2,
                  "run: %s distribution drawn as bars (%d)" % (what, count(r'<rect class="bar"', c.get(k, ""))))
            check(count(r'class="legend-entry"', c[k]) == 3, "run: %s has all instances and one line per instance" % what)
            check(count(r'<rect class="bar"[^>]*><title>[^<]+% of iterations</title>', c[k]) >= 2, "run: %s bars carry their share as a title" % what)
        tp = c.get("run1-ttft-prompt", "")
        check(count(r'<circle class="point" data-series="requests"', tp) >= 100, "run: TTFT vs prompt length has a point per request (%d)" % count(r'<circle class="point"', tp))
        check(count(r'class="marker" data-marker="TTFT SLO[^"]*" data-axis="y"', tp) == 1, "run: TTFT vs prompt length draws the TTFT SLO")
        check('data-x-label="prompt length, tokens"' in tp, "run: TTFT vs prompt length has prompt length on x")
        check(count(r"<title>", dom) >= 10, "run: marks carry <title> tooltips (%d)" % count(r"<title>", dom))
        check(count(r'class="legend-entry"', c["run1-ts-throughput"]) == 2, "run: arrivals and completions in the legend")
        check('data-table="config"' in dom and "cluster.instances" in dom, "run: config table lists the resolved scenario")
        check('data-value="slo_attainment"' in dom and "goodput" in dom, "run: SLO attainment and goodput shown")

        # Three runs compared.
        html = os.path.join(workdir, "compare.html")
        run([binary, "compare", db, "--run", "1", "--run", "2", "--run", "3", "-o", html])
        check_self_contained(html, "compare")
        dom = browse(chromium, html, workdir, "compare", shots)
        c = charts(dom)
        cdfs = [k for k in c if "-cdf-" in k]
        check(len(cdfs) == 5, "compare: 5 CDF charts")
        for k in cdfs:
            check(count(r'<path class="series"', c[k]) == 3, "compare: %s overlays 3 CDF paths" % k)
            check(count(r'class="legend-entry"', c[k]) == 3, "compare: %s has 3 legend entries" % k)
        check(count(r'class="legend-entry"', c["cmp-ts-throughput"]) == 6, "compare: arrivals and completions of 3 runs")
        for k in ("cmp-batch-size", "cmp-batch-tokens", "cmp-ttft-prompt"):
            check(k in c and count(r'class="legend-entry"', c[k]) == 3, "compare: %s overlays 3 runs" % k)
        metrics = re.search(r'<table class="metrics" data-table="metrics">.*?</table>', dom, re.S).group(0)
        check(count(r"Δ vs run 1", metrics) == 2, "compare: side-by-side table has 2 delta columns")
        check(count(r'class="num (better|worse)"', metrics) >= 3, "compare: deltas are marked better or worse")
        check("keys differ between runs" in dom and 'data-table="config-diff"' in dom, "compare: config differences are listed")

        # The plan.
        html = os.path.join(workdir, "plan.html")
        run([binary, "report", db, "--plan", "1", "-o", html])
        check_self_contained(html, "plan")
        dom = browse(chromium, html, workdir, "plan", shots)
        c = charts(dom)
        front = c.get("plan1-frontier", "")
        check(count(r'class="point"[^>]*data-role="frontier"', front) >= 1, "plan: Pareto frontier points drawn")
        check(count(r'class="point"[^>]*data-role="chosen"', front) == 1, "plan: the chosen config is marked once")
        check(count(r'class="point"[^>]*data-role="(meets|fails)"', front) >= 2, "plan: simulated configs drawn")
        check(count(r'class="legend-entry"', front) == 4, "plan: frontier legend has 4 entries")
        check(re.search(r'data-reason="[^"]+"', dom) is not None, "plan: pruned configs counted by reason")
        tok = c.get("plan1-throughput", "")
        check('data-x-label="output tokens/s per user (1 / mean TPOT)" data-y-label="output tokens/s per GPU"' in tok,
              "plan: frontier of output tokens/s per user (x) vs per GPU (y)")
        check(count(r'class="point"[^>]*data-role="frontier"', tok) >= 1, "plan: tokens/s frontier points drawn")
        check(count(r'class="point"[^>]*data-role="chosen"', tok) == 1, "plan: the chosen config is on the tokens/s chart once")
        check(count(r'class="point"[^>]*data-role="(meets|fails)"', tok) >= 2, "plan: simulated configs on the tokens/s chart")
        cost = c.get("plan1-cost", "")
        check(count(r'<rect class="bar"', cost) >= 2, "plan: cost per million output tokens, one bar per config (%d)" % count(r'<rect class="bar"', cost))
        check(count(r'<rect class="bar"[^>]*data-role="chosen"', cost) == 1, "plan: the chosen config's cost bar is marked")
        check(count(r"per 1M output tokens", cost) >= 2, "plan: cost bars carry their value as a title")
        bisect = [k for k in c if "-bisect-" in k]
        check(len(bisect) >= 1, "plan: capacity search charts (%d)" % len(bisect))
        for k in bisect:
            check(count(r'class="point"[^>]*data-role="probe"', c[k]) >= 2, "plan: %s shows its bisection steps" % k)
            check(count(r'class="marker"[^>]*data-axis="y"', c[k]) == 1, "plan: %s marks the attainment target" % k)

        # A capacity search.
        cap_db = os.path.join(workdir, "capacity.db")
        out = run([binary, "capacity", golden, "--slo", "tbt_p99=100ms", "--slo", "ttft_p90=2s", "--db", cap_db]).stdout
        check("capacity_id 1" in out, "capacity: the search is stored (capacity_id 1)")
        html = os.path.join(workdir, "capacity.html")
        run([binary, "report", cap_db, "--capacity", "1", "-o", html])
        check_self_contained(html, "capacity")
        dom = browse(chromium, html, workdir, "capacity", shots)
        c = charts(dom)
        probes = count(r"<tr data-probe=", dom)
        check(probes >= 4, "capacity: every probe listed (%d)" % probes)
        for k, slo in (("capacity1-latency-tbt", "SLO tbt_p99"), ("capacity1-latency-ttft", "SLO ttft_p90")):
            check(k in c and count(r'<path class="series"', c[k]) == 3, "capacity: %s draws p50, p90 and p99 against offered rate" % k)
            check(count(r'class="marker" data-marker="%s[^"]*" data-axis="y"' % slo, c[k]) == 1, "capacity: %s draws its SLO threshold" % k)
            check(count(r'class="marker" data-marker="capacity [^"]*" data-axis="x"', c[k]) == 1, "capacity: %s marks the capacity found" % k)
        att = c.get("capacity1-attainment", "")
        check(count(r'class="point"[^>]*data-role="(probe|stopped)"', att) == probes, "capacity: attainment vs load has every probe")
        check(count(r'class="marker" data-marker="capacity [^"]*" data-axis="x"', att) == 1, "capacity: attainment vs load marks the capacity")
        html = os.path.join(workdir, "capacity-target.html")
        run([binary, "capacity", golden, "--slo", "ttft=1s", "--attainment", "0.9", "--db", cap_db])
        run([binary, "report", cap_db, "--capacity", "-o", html])
        text = open(html, encoding="utf-8").read()
        check('data-capacity="2"' in text, "capacity: --capacity without an id draws the last search")
        att = charts(text).get("capacity2-attainment", "")
        check(count(r'data-marker="attainment target 90.0 %" data-axis="y"', att) == 1,
              "capacity: attainment vs load draws the attainment target")
        print("PASS")
        return 0
    finally:
        shutil.rmtree(workdir, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
