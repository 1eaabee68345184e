// A group's lag over the last minutes (GET /v1/groups/{group}/metrics): an inline SVG chart,
// one line per topic, described by its aria-label, and the same points in a table.
import { h, num, table, time } from "./dom.js";

const SVG = "http://www.w3.org/2000/svg";
const COLORS = ["#1f5fbf", "#c2410c", "#15803d", "#7e22ce", "#b91c1c", "#0e7490"];
const W = 640;
const H = 200;
const PAD = { left: 48, right: 12, top: 12, bottom: 28 };

function svg(tag, attrs = {}, ...children) {
  const el = document.createElementNS(SVG, tag);
  for (const [key, value] of Object.entries(attrs)) el.setAttribute(key, String(value));
  for (const child of children) el.append(child instanceof Node ? child : document.createTextNode(String(child)));
  return el;
}

function clock(ms) {
  return new Date(ms).toISOString().slice(11, 16);
}

/** The lag per minute summed over the topics: [[timestamp, lag], ...], oldest first. */
export function totalLag(metrics) {
  const total = new Map();
  for (const topic of metrics.topics) {
    for (const p of topic.points) {
      if (p.lag !== null && p.lag !== undefined) total.set(p.timestamp, (total.get(p.timestamp) || 0) + p.lag);
    }
  }
  return [...total.entries()].sort((a, b) => a[0] - b[0]);
}

function describe(group, metrics, minutes) {
  const total = totalLag(metrics);
  if (!total.length) return `Lag of group ${group} over the last ${minutes} minutes: no data points yet.`;
  const values = total.map(([, v]) => v);
  return (
    `Lag of group ${group} over the last ${minutes} minutes, ${total.length} points: ` +
    `from ${values[0]} to ${values[values.length - 1]} messages (highest ${Math.max(...values)}).`
  );
}

function chartSvg(group, metrics, minutes) {
  const topics = metrics.topics.filter((t) => t.points.some((p) => p.lag !== null));
  const high = Math.max(1, ...topics.flatMap((t) => t.points.map((p) => p.lag || 0)));
  const x = (ms) => PAD.left + ((ms - metrics.start) / (metrics.end - metrics.start)) * (W - PAD.left - PAD.right);
  const y = (v) => H - PAD.bottom - (v / high) * (H - PAD.top - PAD.bottom);
  const chart = svg("svg", {
    viewBox: `0 0 ${W} ${H}`,
    width: W,
    height: H,
    role: "img",
    "aria-label": describe(group, metrics, minutes),
    class: "chart",
  });
  chart.append(
    svg("line", { x1: PAD.left, y1: y(0), x2: W - PAD.right, y2: y(0), stroke: "#5b6675" }),
    svg("line", { x1: PAD.left, y1: PAD.top, x2: PAD.left, y2: y(0), stroke: "#5b6675" }),
    svg("text", { x: PAD.left - 6, y: y(high) + 4, "text-anchor": "end", "font-size": 11, fill: "#5b6675" }, high),
    svg("text", { x: PAD.left - 6, y: y(0) + 4, "text-anchor": "end", "font-size": 11, fill: "#5b6675" }, 0),
    svg("text", { x: PAD.left, y: H - 8, "font-size": 11, fill: "#5b6675" }, `${clock(metrics.start)} UTC`),
    svg("text", { x: W - PAD.right, y: H - 8, "text-anchor": "end", "font-size": 11, fill: "#5b6675" }, `${clock(metrics.end)} UTC`),
  );
  topics.forEach((topic, i) => {
    const color = COLORS[i % COLORS.length];
    const points = topic.points.filter((p) => p.lag !== null).map((p) => `${x(p.timestamp).toFixed(1)},${y(p.lag).toFixed(1)}`);
    chart.append(svg("polyline", { points: points.join(" "), fill: "none", stroke: color, "stroke-width": 2 }));
    for (const p of points) {
      const [cx, cy] = p.split(",");
      chart.append(svg("circle", { cx, cy, r: 2.5, fill: color }));
    }
  });
  return { chart, topics };
}

/** The chart, its legend and the table of its points. */
export function lagChart(group, metrics, minutes) {
  const { chart, topics } = chartSvg(group, metrics, minutes);
  const legend = h(
    "ul",
    { class: "legend", "aria-label": "Chart legend" },
    topics.map((t, i) => h("li", { class: `swatch-${i % COLORS.length}` }, t.topic)),
  );
  const dead = new Map((metrics.dead_letters || []).map((p) => [p.timestamp, p.dead_letters]));
  const rows = metrics.topics.flatMap((t) =>
    t.points.map((p) => [time(p.timestamp), t.topic, num(p.lag), num(p.oldest_unacked_age_seconds === null ? null : Math.round(p.oldest_unacked_age_seconds)), num(p.in_flight), num(dead.get(p.timestamp))]),
  );
  rows.sort((a, b) => (a[0] < b[0] ? -1 : a[0] > b[0] ? 1 : 0));
  return h(
    "section",
    { "aria-label": "Lag chart" },
    h("h3", {}, `Lag over the last ${minutes} minutes`),
    h("p", { class: "muted" }, "One point per minute, as the GroupMetricsFunction emits it (read back from CloudWatch; locally from the local stack's copy)."),
    chart,
    legend,
    table(
      "Lag per minute",
      ["Minute", "Topic", "Lag", "Oldest unacked age (s)", "In flight", "Dead letters"],
      rows,
      { empty: "No points yet: the group metrics are emitted once a minute." },
    ),
  );
}
