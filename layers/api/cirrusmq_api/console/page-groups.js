// Consumer groups: the groups the key may see (GET /v1/groups); per group its lag over the
// last hour (chart and table), per queue committed offset, lag, in flight, oldest unacked
// and its attempt; live consumers and their queues; rewind to a time, the earliest or the
// latest. A group can also be opened by name (recent ones are remembered).
import { call, path } from "./api.js";
import { lagChart } from "./chart.js";
import { field, fill, h, num, table, time, utcInputMs } from "./dom.js";

const CHART_MINUTES = 60;

const RECENT_KEY = "cirrusmq.console.recent-groups";

export function recentGroups() {
  try {
    return JSON.parse(sessionStorage.getItem(RECENT_KEY) || "[]");
  } catch {
    return [];
  }
}

function remember(group) {
  const recent = [group, ...recentGroups().filter((g) => g !== group)].slice(0, 20);
  sessionStorage.setItem(RECENT_KEY, JSON.stringify(recent));
}

/** The names the key may see (GET /v1/groups), for a picker's suggestions; [] if refused. */
export async function listedGroups() {
  try {
    return (await call("GET", path("v1", "groups"))).groups.map((g) => g.group);
  } catch {
    return [];
  }
}

export function groupPicker(label, button, target, ctx, known = []) {
  const name = h("input", { name: "group", required: true, list: "recent-groups" });
  const suggested = [...new Set([...recentGroups(), ...known])];
  const form = h(
    "form",
    { class: "inline", "aria-label": button },
    field(label, name),
    h("datalist", { id: "recent-groups" }, suggested.map((g) => h("option", { value: g }))),
    h("button", { type: "submit", class: "primary" }, button),
  );
  form.addEventListener("submit", (event) => {
    event.preventDefault();
    ctx.go(`${target}/${encodeURIComponent(name.value.trim())}`);
  });
  return form;
}

function rewindForm(group, topics, ctx, reload) {
  const topic = h("select", { name: "topic" }, topics.map((t) => h("option", { value: t }, t)));
  const to = h(
    "select",
    { name: "to" },
    h("option", { value: "timestamp" }, "a time"),
    h("option", { value: "earliest" }, "the earliest"),
    h("option", { value: "latest" }, "the latest"),
  );
  const at = h("input", { name: "time", type: "datetime-local", step: 1 });
  const form = h(
    "form",
    { class: "inline", "aria-label": "Rewind" },
    field("Topic", topic),
    field("Rewind to", to),
    field("Time (UTC)", at),
    h("button", { type: "submit" }, "Rewind"),
  );
  form.addEventListener("submit", async (event) => {
    event.preventDefault();
    const where = to.value === "timestamp" ? at.value || "a time" : `the ${to.value}`;
    const question = `Rewind ${group} on ${topic.value} to ${where}? Messages in flight lose their leases and are delivered again.`;
    if (!window.confirm(question)) return;
    const body = { to: to.value };
    if (to.value === "timestamp") {
      body.timestamp = utcInputMs(at);
      if (body.timestamp === null) return ctx.error("Give the time to rewind to.");
    }
    try {
      const result = await call("POST", path("v1", "groups", group, "offsets", topic.value, "reset"), { body });
      await reload();
      const moved = result.queues.map((q) => `queue ${q.queue} → ${q.offset}`).join(", ");
      ctx.status(`Rewound ${group} on ${result.topic} to ${result.to}: ${moved}.${result.note ? " " + result.note : ""}`);
    } catch (error) {
      ctx.error(error);
    }
  });
  return form;
}

function consumerQueues(consumer) {
  return consumer.topics
    .map((t) => `${t.topic} (${t.filter}): ${t.queues === null || t.queues === undefined ? "all queues" : t.queues.join(", ") || "none"}`)
    .join("; ");
}

async function loadChart(group) {
  try {
    const metrics = await call("GET", path("v1", "groups", group, "metrics"), { query: { minutes: CHART_MINUTES } });
    return lagChart(group, metrics, CHART_MINUTES);
  } catch (error) {
    // the rest of the page still shows (e.g. the metrics could not be read)
    return h("p", { class: "muted", "aria-label": "Lag chart" }, `No lag chart: ${error.message}`);
  }
}

async function renderGroup(view, group, ctx) {
  const body = h("div");
  const reload = async () => {
    const [described, chart] = await Promise.all([call("GET", path("v1", "groups", group)), loadChart(group)]);
    if (!described.queues.length && !described.subscriptions.length && !(described.consumers || []).length) {
      fill(body, h("p", { class: "panel" }, `No such group: ${group} has no state, subscription or live consumer this key may see.`));
      return false;
    }
    // Rewind offers the user topics: a dotted name is an internal one (the group's retry
    // topic, retry.<group>.<topic>), which no name a user gives can be.
    const topics = [...new Set([...described.subscriptions.map((s) => s.topic), ...described.queues.map((q) => q.topic)])].filter(
      (t) => !t.includes("."),
    );
    // The API lists the queues the group has taken messages from, and its retry topics'
    // queues holding messages it has not read yet (a queue of a user topic not yet touched: absent).
    const lag = described.queues.reduce((sum, q) => sum + q.lag, 0);
    const inflight = described.queues.reduce((sum, q) => sum + q.inflight, 0);
    fill(
      body,
      h(
        "div",
        { class: "panel" },
        h("span", {}, "Total lag: "),
        h("output", { class: "big", "aria-label": "Total lag" }, String(lag)),
        h("span", { class: "muted" }, `  ·  in flight ${inflight}  ·  max delivery attempts ${described.max_delivery_attempts ?? "default"}`),
      ),
      chart,
      table(
        "Queues",
        ["Topic", "Queue", "Committed offset", "Cursor", "Max offset", "Lag", "In flight", "Oldest unacked", "Its attempt"],
        described.queues.map((q) => [
          q.topic,
          num(q.queue),
          num(q.committed_offset),
          num(q.cursor),
          num(q.max_offset),
          num(q.lag),
          num(q.inflight),
          num(q.oldest_unacked_offset),
          num(q.oldest_unacked_attempt),
        ]),
        { empty: "The group has consumed nothing yet." },
      ),
      table(
        "Subscriptions",
        ["Topic", "Type", "Filter"],
        described.subscriptions.map((s) => [s.topic, s.filter_type || "TAG", s.filter]),
      ),
      table(
        "Live consumers",
        ["Client ID", "Orderly", "Last heartbeat", "Expires", "Queues"],
        (described.consumers || []).map((c) => [c.client_id, c.orderly ? "yes" : "no", time(c.last_heartbeat), time(c.expires_at), consumerQueues(c)]),
        { empty: "No consumer has sent a heartbeat recently." },
      ),
      topics.length ? rewindForm(group, topics, ctx, reload) : null,
    );
  };
  if ((await reload()) !== false) remember(group);
  const refresh = h(
    "button",
    {
      type: "button",
      onclick: () => reload().then(() => ctx.status(`Refreshed at ${time(Date.now())}.`), (error) => ctx.error(error)),
    },
    "Refresh",
  );
  view.append(
    h("h2", {}, "Group ", group),
    h(
      "div",
      { class: "actions" },
      refresh,
      h("a", { href: `#/dead-letters/${encodeURIComponent(group)}` }, "Dead letters of this group"),
    ),
    body,
  );
}

export async function render(view, args, ctx) {
  if (args[0]) return renderGroup(view, args[0], ctx);
  const recent = recentGroups();
  const listed = await call("GET", path("v1", "groups"));
  const lags = await Promise.all(
    listed.groups.map((g) =>
      call("GET", path("v1", "groups", g.group)).then(
        (d) => d.queues.reduce((sum, q) => sum + q.lag, 0),
        () => null, // not described (e.g. refused): shown as "–"
      ),
    ),
  );
  // fill, not view.append: the DOM's append shows a missing (null) section as "null"
  fill(
    view,
    h("h2", {}, "Groups"),
    table(
      "Consumer groups",
      ["Group", "Topics", "Lag", ""],
      listed.groups.map((g, i) => [
        g.group,
        g.topics.join(", ") || "–",
        num(lags[i]),
        h("a", { href: `#/groups/${encodeURIComponent(g.group)}`, "aria-label": `Open group ${g.group}` }, "Open"),
      ]),
      { empty: "No group this key may see has consumed anything or subscribed yet." },
    ),
    groupPicker("Group name", "Show group", "#/groups", ctx, listed.groups.map((g) => g.group)),
    h("p", { class: "muted" }, "The list shows the groups with state or a subscription that this key may consume as; open another by name."),
    recent.length
      ? h(
          "section",
          { "aria-label": "Recent groups" },
          h("h3", {}, "Recent groups"),
          h("ul", {}, recent.map((g) => h("li", {}, h("a", { href: `#/groups/${encodeURIComponent(g)}` }, g)))),
        )
      : null,
  );
}
