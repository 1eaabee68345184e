"""Benchmark report: runs the benchmarks on the local stack and writes docs/benchmarks/.

    python tests/benchmarks/bench_report.py [--quick] [--out docs/benchmarks] [--only NAME,...]
    python tests/benchmarks/bench_report.py --from-data docs/benchmarks/data   # re-render only

Each step runs one benchmark script in its own process with ``--json``; the JSON files are
kept in ``<out>/data/`` next to the page (``README.md``) and its PNG charts. Every step
records when it ran and the machine's cores and load average at its start and end; the page
prints them under each figure. Costs are the benchmarks' counted calls times list prices
(never timings); latencies and rows/s are wall times on this machine against moto.
``--quick`` runs fewer messages and rounds (a few minutes); the full run takes ~25 minutes on
2 cores. A step that fails is reported on the page as not measured, and the exit code is 1.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]


@dataclass(frozen=True)
class Step:
    """One benchmark run: its script, its arguments (full and quick) and what it measures."""

    name: str
    script: str
    full: tuple[str, ...]
    quick: tuple[str, ...]
    title: str

    def command(self, quick: bool, json_path: Path) -> list[str]:
        args = self.quick if quick else self.full
        return [sys.executable, str(HERE / self.script), *args, "--json", str(json_path)]


STEPS = (
    Step(
        "core",
        "core_queue.py",
        (
            "--messages",
            "1000",
            "--inflight",
            "100",
            "--profile",
            "default,steady",
            "--front-door",
            "http-api,function-url",
        ),
        (
            "--messages",
            "100",
            "--inflight",
            "20",
            "--no-piggyback",
            "--profile",
            "default,steady",
            "--front-door",
            "http-api,function-url",
        ),
        "cost per million messages (counted calls x list prices), idle consumer polling",
    ),
    Step(
        "latency",
        "latency.py",
        ("--rounds", "20"),
        ("--rounds", "5"),
        "produce and end-to-end latency by batch size",
    ),
    Step(
        "idle",
        "idle_consumer.py",
        ("--seconds", "60", "--rounds", "5", "--fanout", "1000"),
        ("--seconds", "20", "--cycle", "5", "--rounds", "2", "--fanout", "50"),
        "an idle PushConsumer on the notification channel",
    ),
    Step(
        "spark",
        "spark_read.py",
        ("--messages", "20000", "--repeat", "5"),
        ("--messages", "2000", "--repeat", "1"),
        "Spark rows/s: the data source vs Parquet readers",
    ),
    Step(
        "delays",
        "delays.py",
        ("--messages", "1000", "--spread", "60"),
        ("--messages", "100", "--spread", "20"),
        "delayed messages: lateness",
    ),
)

AWS_LATENCY_SOURCES = {
    "S3 Standard": (
        "median latencies often in the tens of milliseconds for requests under 512 KB",
        "https://docs.aws.amazon.com/whitepapers/latest/s3-optimizing-performance-best-practices/"
        "timeouts-and-retries-for-latency-sensitive-applications.html",
        (10, 100),
    ),
    "S3 Express One Zone": (
        "consistent single-digit milliseconds",
        "https://aws.amazon.com/solutions/guidance/"
        "writing-high-transaction-workloads-on-amazon-s3-express-one-zone/",
        (1, 10),
    ),
    "DynamoDB": (
        "consistent single-digit millisecond latency at any scale (per call)",
        "https://aws.amazon.com/dynamodb/ (also the AWS SDK's service description)",
        (1, 10),
    ),
    "HTTP API + warm Lambda invoke": (
        "no published figure: assumed 10-30 ms together (an assumption, not a source)",
        "",
        (10, 30),
    ),
}
"""Component latencies AWS publishes (range in ms), for the on-paper estimate."""
SOURCES_READ = "2026-12-02"
"""When the published figures above were looked up."""
DDB_CALLS = {"produce": 2, "receive": 3}
"""DynamoDB round trips in sequence on the critical path, assumed: DESIGN.md §6's floor has
one per send (the index transaction) and one per receive (the claim); the handlers also read
state and heads, so a few more are allowed for."""


# ============================================================== the machine
def machine_now() -> dict[str, Any]:
    """When, and how busy the machine is: cores and the 1-minute load average."""
    return {
        "utc": datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d %H:%M UTC"),
        "cores": os.cpu_count(),
        "load": round(os.getloadavg()[0], 2),
    }


def machine_description() -> str:
    return f"{platform.system()} {platform.machine()}, Python {platform.python_version()}"


# ============================================================== running
def run_steps(
    steps: tuple[Step, ...], quick: bool, data_dir: Path, log_dir: Path
) -> dict[str, dict[str, Any]]:
    """Run each step, one line of progress per step; its JSON (or error) and when it ran."""
    data_dir.mkdir(parents=True, exist_ok=True)
    log_dir.mkdir(parents=True, exist_ok=True)
    started = time.monotonic()
    results: dict[str, dict[str, Any]] = {}
    for number, step in enumerate(steps, 1):
        json_path = data_dir / f"{step.name}.json"
        json_path.unlink(missing_ok=True)
        log = log_dir / f"{step.name}.log"
        print(
            f"[{number}/{len(steps)}] {step.name}: {step.script}"
            f" ({time.monotonic() - started:.0f} s elapsed; log {log})",
            flush=True,
        )
        before = machine_now()
        t = time.monotonic()
        with log.open("w") as out:
            done = subprocess.run(
                step.command(quick, json_path), cwd=ROOT, stdout=out, stderr=subprocess.STDOUT
            )
        record: dict[str, Any] = {
            "start": before,
            "end": machine_now(),
            "seconds": round(time.monotonic() - t),
            "arguments": list(step.quick if quick else step.full),
        }
        if json_path.exists():
            record["data"] = json.loads(json_path.read_text())
        if done.returncode or "data" not in record:
            tail = log.read_text().strip().splitlines()[-3:]
            record["error"] = f"exit {done.returncode}: " + " / ".join(tail)
        results[step.name] = record
        status = "failed" if "error" in record else "done"
        print(f"      {step.name} {status} in {record['seconds']} s", flush=True)
    print(f"all steps in {time.monotonic() - started:.0f} s", flush=True)
    return results


# ============================================================== the idle deployment
def at_rest_table(deploy_md: Path) -> list[dict[str, Any]]:
    """The at-rest table of docs/deploy.md: function, $ requests and $ Lambda a month."""
    rows = []
    text = deploy_md.read_text()
    section = text.split("## What it costs at rest", 1)[-1].split("\n## ", 1)[0]
    for line in section.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) == 6 and cells[0].endswith("Function"):
            rows.append(
                {
                    "function": cells[0],
                    "requests": float(cells[4].lstrip("$")),
                    "lambda": float(cells[5].lstrip("$")),
                }
            )
    return rows


# ============================================================== the page
def stamp(record: dict[str, Any]) -> str:
    """The line under a figure: when and where it was measured."""
    s, e = record["start"], record["end"]
    return (
        f"Measured {s['utc']} ({record['seconds']} s) on {s['cores']} cores"
        f" ({machine_description()}), load average {s['load']:g} at the start and"
        f" {e['load']:g} at the end; arguments `{' '.join(record['arguments']) or '(defaults)'}`."
    )


def money(value: float | None) -> str:
    if value is None:
        return "-"
    return f"${value:,.4f}"


def ms(value: float | None) -> str:
    return "-" if value is None else f"{value:,.0f}"


def not_measured(record: dict[str, Any] | None) -> str | None:
    if record is None:
        return "Not run in this report."
    if "data" not in record:
        return f"Not measured: the step failed ({record.get('error', 'no output')})."
    return None


def _pyplot() -> Any:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def chart_costs(data: dict[str, Any], path: Path) -> None:
    plt = _pyplot()
    batches = [b["batch"] for b in data["batches"]]
    fig, ax = plt.subplots(figsize=(7, 4.2))
    for name in data["profiles"]:
        ax.plot(batches, [b["profiles"][name]["total"] for b in data["batches"]], "o-", label=name)
    ax.plot(batches, [b["sqs_same_batch"] for b in data["batches"]], "s--", label="SQS, same batch")
    ax.axhline(data["sqs_best"], color="grey", linestyle=":", label="SQS best (batches of 10)")
    ax.plot(batches, [b["design_floor"] for b in data["batches"]], "^:", label="design floor")
    ax.set(xscale="log", yscale="log", xlabel="messages per request (batch size)")
    ax.set_ylabel("$ per million messages")
    ax.set_title("Cost per million messages (produce + receive + ack)")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


def aws_estimate() -> dict[str, tuple[float, float]]:
    """On-paper latency ranges (ms) in AWS from the published component figures."""
    gw = AWS_LATENCY_SOURCES["HTTP API + warm Lambda invoke"][2]
    ddb = AWS_LATENCY_SOURCES["DynamoDB"][2]
    estimate = {}
    for storage in ("S3 Standard", "S3 Express One Zone"):
        s3 = AWS_LATENCY_SOURCES[storage][2]
        produce = tuple(gw[i] + s3[i] + DDB_CALLS["produce"] * ddb[i] for i in (0, 1))
        receive = tuple(gw[i] + s3[i] + DDB_CALLS["receive"] * ddb[i] for i in (0, 1))
        estimate[f"produce, {storage}"] = produce
        estimate[f"end-to-end, {storage}"] = (produce[0] + receive[0], produce[1] + receive[1])
    return estimate


def chart_latency(data: dict[str, Any], path: Path) -> None:
    plt = _pyplot()
    batches = [b["batch"] for b in data["batches"]]
    fig, ax = plt.subplots(figsize=(7, 4.2))
    for key, label in (("produce", "produce"), ("end_to_end", "end-to-end")):
        for q, style in (("p50_ms", "o-"), ("p99_ms", "x--")):
            values = [b[key][q] for b in data["batches"]]
            ax.plot(batches, values, style, label=f"{label} {q[:3]} (local, moto)")
    low, high = aws_estimate()["end-to-end, S3 Standard"]
    ax.axhspan(low, high, color="tab:green", alpha=0.15, label="AWS estimate, end-to-end (S3)")
    ax.set(xscale="log", yscale="log", xlabel="messages per request (batch size)")
    ax.set_ylabel("ms")
    ax.set_title("Latency by batch size")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


def chart_spark(data: dict[str, Any], path: Path) -> None:
    plt = _pyplot()
    names = list(data["readers"])
    fig, ax = plt.subplots(figsize=(7, 3))
    ax.barh(names, [data["readers"][n]["rows_per_s"] for n in names])
    ax.invert_yaxis()
    ax.set_xlabel("rows/s (best run)")
    ax.set_title(f"Spark read of {data['messages']:,} messages ({data['master']})")
    ax.grid(True, axis="x", alpha=0.3)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


def chart_delays(data: dict[str, Any], path: Path) -> None:
    plt = _pyplot()
    kinds = [k for k in ("visible", "received") if data["lateness"].get(k)]
    fig, ax = plt.subplots(figsize=(7, 3))
    width = 0.25
    for i, q in enumerate(("p50_ms", "p99_ms", "max_ms")):
        xs = [j + (i - 1) * width for j in range(len(kinds))]
        ax.bar(xs, [data["lateness"][k][q] for k in kinds], width, label=q[:-3])
    ax.set_xticks(range(len(kinds)), [f"{k} - due" for k in kinds])
    ax.set_ylabel("ms late")
    ax.set_title(f"Delayed messages: lateness ({data['received']} of {data['messages']})")
    ax.legend(fontsize=8)
    ax.grid(True, axis="y", alpha=0.3)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


def section_costs(record: dict[str, Any] | None, out: Path, lines: list[str]) -> None:
    lines += ["## 1. Cost per million messages", ""]
    missing = not_measured(record)
    if missing or record is None:
        lines += [missing or "", ""]
        return
    data = record["data"]
    chart_costs(data, out / "cost.png")
    lines += [
        "![cost per million messages by batch size](cost.png)",
        "",
        f"Produce + receive + ack of 1 KiB messages, acks riding on receives. {data['prices']};"
        " every figure is the calls counted in the run (DynamoDB units from item sizes, S3"
        " requests, API and Lambda requests, Lambda GB-s) times list prices. Lambda GB-s: the"
        " handlers' wait measured here plus their CPU time at the CPU share Lambda gives the"
        " MemorySize (one vCPU at 1,769 MB; a Lambda vCPU taken as fast as one core here)."
        " Profiles:",
        "",
    ]
    lines += [f"- `{name}`: {text}" for name, text in data["profiles"].items()]
    names = list(data["profiles"])
    lines += [
        "",
        "| batch | "
        + " | ".join(f"{n} | {n} w/o Lambda GB-s" for n in names)
        + " | SQS same batch | design floor |",
        "|---:|" + "---:|" * (2 * len(names) + 2),
    ]
    for b in data["batches"]:
        cells = []
        for n in names:
            p = b["profiles"][n]
            cells += [money(p["total"]), money(p["without_lambda_duration"])]
        lines.append(
            f"| {b['batch']:,} | "
            + " | ".join(cells)
            + f" | {money(b['sqs_same_batch'])} | {money(b['design_floor'])} |"
        )
    lines += aws_duration_table(data, names)
    goals = [
        f"- batch {b['batch']:,}, `{n}`: goal {money(p['goal'])}: here "
        + ("met" if p["total"] <= p["goal"] else "**not met**")
        + f" ({money(p['total'])}; {money(p['without_lambda_duration'])} without Lambda GB-s)"
        + aws_verdict(p)
        for b in data["batches"]
        for n, p in b["profiles"].items()
        if p.get("goal") is not None
    ]
    if goals:
        lines += ["", "Goals (Lambda duration counted):", ""]
        lines += goals
    lines += [
        "",
        f"SQS best (standard queue, batches of 10): {money(data['sqs_best'])}. Design floor:"
        " DESIGN.md §6's physical minimum (arithmetic, not measured).",
        "",
        f"_{stamp(record)}_",
        "",
    ]


def aws_duration_table(data: dict[str, Any], names: list[str]) -> list[str]:
    """The totals with Lambda duration on paper for AWS: the CPU time measured here, each
    call's published latency in AWS in place of moto's (low-high)."""
    if not all("aws_lambda_duration" in p for b in data["batches"] for p in b["profiles"].values()):
        return []
    s3 = data.get("aws_s3_latency_ms", (10, 100))
    lines = [
        "",
        "The same totals with Lambda duration on paper for AWS: the CPU time measured here,"
        " and each call's latency as AWS publishes it in place of moto's"
        f" ({data.get('batch_storage', 'S3 Standard')} {s3[0]}-{s3[1]} ms, DynamoDB and"
        " other calls 1-10 ms; calls one after another), low-high:",
        "",
        "| batch | " + " | ".join(names) + " |",
        "|---:|" + "---:|" * len(names),
    ]
    for b in data["batches"]:
        cells = []
        for n in names:
            p = b["profiles"][n]
            low, high = (p["without_lambda_duration"] + d for d in p["aws_lambda_duration"])
            cells.append(f"{money(low)}-{money(high)}")
        lines.append(f"| {b['batch']:,} | " + " | ".join(cells) + " |")
    return lines


def aws_verdict(profile: dict[str, Any]) -> str:
    """Whether the goal holds with Lambda duration on paper for AWS (empty: not priced)."""
    if "aws_lambda_duration" not in profile:
        return ""
    low, high = (profile["without_lambda_duration"] + d for d in profile["aws_lambda_duration"])
    goal = profile["goal"]
    held = "met" if high <= goal else "**not met**" if low > goal else "met at the low end only"
    return f"; on paper for AWS {held} ({money(low)}-{money(high)})"


def section_latency(record: dict[str, Any] | None, out: Path, lines: list[str]) -> None:
    lines += ["## 2. Produce and end-to-end latency", ""]
    missing = not_measured(record)
    if missing or record is None:
        lines += [missing or "", ""]
    else:
        data = record["data"]
        chart_latency(data, out / "latency.png")
        lines += [
            "![latency by batch size](latency.png)",
            "",
            "Local stack (moto server, handlers in this machine's processes), one client, wall"
            " time per request: produce = one produce request of `batch` messages; end-to-end ="
            " from the start of that request to the receive that returned its last message."
            " Against moto on a small machine: compare batch sizes, not absolute values."
            " With fewer than 100 rounds, p99 is the slowest round.",
            "",
            "| batch | rounds | produce p50 ms | produce p99 ms | end-to-end p50 ms |"
            " end-to-end p99 ms |",
            "|---:|---:|---:|---:|---:|---:|",
        ]
        for b in data["batches"]:
            p, e = b["produce"], b["end_to_end"]
            lines.append(
                f"| {b['batch']:,} | {b['rounds']} | {ms(p['p50_ms'])} | {ms(p['p99_ms'])} |"
                f" {ms(e['p50_ms'])} | {ms(e['p99_ms'])} |"
            )
        lines += ["", f"_{stamp(record)}_", ""]
    lines += [
        "### AWS: an estimate on paper, not a measurement",
        "",
        "From the component latencies AWS publishes, summed along the critical path (produce:"
        " front door + Lambda, one S3 PUT of the batch object, "
        f"{DDB_CALLS['produce']} DynamoDB calls; receive: front door + Lambda,"
        f" {DDB_CALLS['receive']} DynamoDB calls, one S3 GET). Batches up to 1,000 x 1 KiB"
        " (1 MB) are assumed to stay in the same range. Not measured in AWS; sources read"
        f" {SOURCES_READ}.",
        "",
        "| component | published figure | source |",
        "|---|---|---|",
    ]
    for name, (text, url, _) in AWS_LATENCY_SOURCES.items():
        lines.append(f"| {name} | {text} | {url or '-'} |")
    lines += ["", "| path | estimate (ms) |", "|---|---:|"]
    for name, (low, high) in aws_estimate().items():
        lines.append(f"| {name} | {low:.0f}-{high:.0f} |")
    lines.append("")


def section_idle(
    core: dict[str, Any] | None, idle: dict[str, Any] | None, deploy_md: Path, lines: list[str]
) -> None:
    lines += ["## 3. Idle costs", "", "### An idle deployment", ""]
    rows = at_rest_table(deploy_md)
    if rows:
        lines += [
            "From the at-rest table of [docs/deploy.md](../deploy.md#what-it-costs-at-rest)"
            " (tests/benchmarks/at_rest.py; storage not included):",
            "",
            "| function | requests a month | Lambda a month |",
            "|---|---:|---:|",
        ]
        lines += [
            f"| {r['function']} | {money(r['requests'])} | {money(r['lambda'])} |" for r in rows
        ]
        total = sum(r["requests"] + r["lambda"] for r in rows)
        lines += ["", f"Total: about **{money(total)} a month** plus storage.", ""]
    lines += ["### An idle consumer, per month", ""]
    table = ["| consumer | $ a month | measured by |", "|---|---:|---|"]
    stamps = []
    if core is not None and "data" in core:
        d = core["data"]["idle"]
        table += [
            f"| server long polls (`wait_seconds=20`) | {money(d['long_poll_month'])} |"
            " core_queue.py |",
            f"| PushConsumer adaptive polling (cap {d['push_max_interval_s']:g} s) |"
            f" {money(d['push_consumer_month'])} | core_queue.py |",
            f"| SQS long polling, for comparison | {money(d['sqs_long_poll_month'])} |"
            " list price |",
        ]
        stamps.append(f"core_queue.py: {stamp(core)}")
    if idle is not None and "data" in idle:
        d = idle["data"]
        table.append(
            f"| PushConsumer on the notification channel (WebSocket) |"
            f" {money(d['consumer_month'])} | idle_consumer.py (wake-up p50"
            f" {ms(d['wake_up_p50_ms'])} ms, max {ms(d['wake_up_max_ms'])} ms) |"
        )
        stamps.append(f"idle_consumer.py: {stamp(idle)}")
    if len(table) == 2:
        lines += [not_measured(core) or not_measured(idle) or "", ""]
        return
    lines += [
        *table,
        "",
        "Costs from counted calls x list prices. A server long poll bills the Lambda"
        " duration of its whole wait (20 s at the function's memory), which dominates its"
        " figure.",
        "",
    ]
    lines += [f"_{s}_" + "\n" for s in stamps]


def spark_method(data: dict[str, Any]) -> str:
    """How the Spark benchmark repeated its reads: the native ratio depends on it."""
    if data.get("rounds") == "interleaved":
        return (
            f"best of {data['repeat']} rounds, each round running every reader once (with each"
            " reader's repeats back to back, native reads faster and the native ratio has"
            " mostly been below 0.5: see [docs/spark.md](../spark.md#performance))"
        )
    return "best of each reader's repeats, run back to back"


def section_spark(record: dict[str, Any] | None, out: Path, lines: list[str]) -> None:
    lines += ["## 4. Spark: rows/s vs native Parquet", ""]
    missing = not_measured(record)
    if missing or record is None:
        lines += [missing or "", ""]
        return
    data = record["data"]
    chart_spark(data, out / "spark.png")
    lines += [
        "![Spark rows/s](spark.png)",
        "",
        f"{data['messages']:,} messages of {data['body_bytes']} B in {data['objects']} batch"
        f" objects, local Spark `{data['master']}`; {spark_method(data)}. The data source and"
        " the S3 baseline read through the moto server; native Parquet reads a local copy (see"
        " [docs/spark.md](../spark.md)).",
        "",
        "| reader | rows | best s | rows/s |",
        "|---|---:|---:|---:|",
    ]
    for name, r in data["readers"].items():
        lines.append(f"| {name} | {r['rows']:,} | {r['best_s']:.2f} | {r['rows_per_s']:,.0f} |")
    ratios, goals = data.get("ratios"), data.get("goals", {})
    if ratios:
        said = [
            f"of the {what} {ratios[key]:.2f} (goal ≥ {goals[key]}: "
            + ("met" if ratios[key] >= goals[key] else "**not met**")
            + ")"
            for key, what in (("baseline", "S3 baseline"), ("native", "native reader"))
        ]
        lines += ["", "The data source's rows/s as a share: " + "; ".join(said) + "."]
    lines += ["", f"_{stamp(record)}_", ""]


def section_delays(record: dict[str, Any] | None, out: Path, lines: list[str]) -> None:
    lines += ["## 5. Delayed messages: lateness", ""]
    missing = not_measured(record)
    if missing or record is None:
        lines += [missing or "", ""]
        return
    data = record["data"]
    chart_delays(data, out / "delays.png")
    lines += [
        "![delay lateness](delays.png)",
        "",
        f"{data['messages']:,} messages with due times spread over {data['spread_s']:g} s, in"
        " real time with the scheduler running; visible = the commit that made a message"
        " visible minus its due time, received = a consumer got it minus its due time."
        f" Received {data['received']:,}, early {data['early']}.",
        "",
        "| lateness | p50 ms | p99 ms | max ms |",
        "|---|---:|---:|---:|",
    ]
    for kind, v in data["lateness"].items():
        if v:
            lines.append(f"| {kind} | {ms(v['p50_ms'])} | {ms(v['p99_ms'])} | {ms(v['max_ms'])} |")
    lines += [
        "",
        f"AWS requests of the delay path: {money(data['requests_per_million'])} per million"
        " delayed messages (counted calls x list prices).",
        "",
        f"_{stamp(record)}_",
        "",
    ]


def write_report(
    results: dict[str, dict[str, Any]],
    out: Path,
    *,
    quick: bool,
    deploy_md: Path = ROOT / "docs" / "deploy.md",
) -> Path:
    """Write ``out``/README.md and its charts from the steps' records; the page's path."""
    out.mkdir(parents=True, exist_ok=True)
    loads = [r[k]["load"] for r in results.values() for k in ("start", "end")]
    cores = {r["start"]["cores"] for r in results.values()}
    # the steps' own processes (moto server, handlers, Spark) keep the cores busy while they
    # run: other work shows in the load before the first step started
    before = min((r["start"]["load"] for r in results.values()), default=0.0)
    busy = before > max(cores or {1}) / 2
    lines = [
        "# Benchmarks",
        "",
        "Written by `make bench-report"
        + (' ARGS="--quick"' if quick else "")
        + "` (tests/benchmarks/bench_report.py) on the local stack: the HTTP API's handlers"
        " in-process against a moto server. Costs are counted calls x AWS list prices; times"
        " are wall times on the machine named under each figure.",
        "",
    ]
    if quick:
        lines += ["**Quick run**: fewer messages and rounds than the full report.", ""]
    if busy:
        lines += [
            f"**The machine was loaded** (load average {before:g} before the steps, up to"
            f" {max(loads):g} during them, on {max(cores)} cores, shared with other jobs):"
            " latencies and rows/s are slower and noisier than on an idle machine; the costs"
            " do not depend on it.",
            "",
        ]
    section_costs(results.get("core"), out, lines)
    section_latency(results.get("latency"), out, lines)
    section_idle(results.get("core"), results.get("idle"), deploy_md, lines)
    section_spark(results.get("spark"), out, lines)
    section_delays(results.get("delays"), out, lines)
    page = out / "README.md"
    page.write_text("\n".join(lines).rstrip() + "\n")
    return page


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer messages (a few minutes)")
    parser.add_argument("--out", type=Path, default=ROOT / "docs" / "benchmarks")
    parser.add_argument(
        "--only",
        help=f"steps to run, comma-separated: {', '.join(s.name for s in STEPS)}; the others'"
        " figures are kept from the last run of the same mode",
    )
    parser.add_argument(
        "--from-data", type=Path, help="re-render the page from a data directory, no runs"
    )
    args = parser.parse_args(argv)
    data_dir = args.out / "data"
    if args.from_data:
        saved = json.loads((args.from_data / "report.json").read_text())
        page = write_report(saved["results"], args.out, quick=saved["quick"])
        print(f"wrote {page}")
        return 0
    wanted = set(args.only.split(",")) if args.only else {s.name for s in STEPS}
    steps = tuple(s for s in STEPS if s.name in wanted)
    results = run_steps(steps, args.quick, data_dir, Path("/tmp") / f"bench-report-{os.getpid()}")
    saved_path = data_dir / "report.json"
    if args.only and saved_path.exists():  # the other steps' figures stay as they were
        saved = json.loads(saved_path.read_text())
        if saved["quick"] == args.quick:
            results = {**saved["results"], **results}
    saved_path.write_text(json.dumps({"quick": args.quick, "results": results}, indent=2) + "\n")
    page = write_report(results, args.out, quick=args.quick)
    print(f"wrote {page} and its charts")
    return 1 if any("error" in r for r in results.values()) else 0


if __name__ == "__main__":
    sys.exit(main())
