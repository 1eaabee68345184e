// A topic's messages: per-queue offsets, browse by queue and offset or time, look up by id,
// find by key (newest first, a page at a time), and a message's details with its body as
// text, JSON or hex (a large body: its size, SHA-256 and a Download link, never the body).
import { call, path } from "./api.js";
import {
  base64ToBytes,
  bodyLine,
  bodyViewer,
  facts,
  field,
  fill,
  h,
  largeBodyLine,
  largeBodyView,
  num,
  table,
  time,
  utcInputMs,
} from "./dom.js";

/** A table cell previewing a message's body (a large body's summary, not its pointer). */
function preview(message) {
  const text = message.large_body ? largeBodyLine(message.large_body) : bodyLine(base64ToBytes(message.body));
  return { value: text, class: "preview" };
}

function details(message, traced) {
  const large = message.large_body;
  const bytes = large ? null : base64ToBytes(message.body);
  return h(
    "section",
    { class: "panel", "aria-label": "Message details" },
    h("h3", {}, "Message ", message.message_id),
    facts([
      ["Topic", message.topic],
      ["Queue / offset", `${message.queue} / ${message.offset}`],
      ["Tag", message.tag || "–"],
      ["Keys", (message.keys || []).join(", ") || "–"],
      ["Message group", message.message_group || "–"],
      ["Born", time(message.born_timestamp)],
      ["Stored", time(message.stored_timestamp)],
      ["Size", large ? `${large.size} bytes (large body)` : `${bytes.length} bytes`],
      ["Properties", Object.entries(message.properties || {}).map(([k, v]) => `${k}=${v}`).join(", ") || "–"],
    ]),
    large ? largeBodyView(large, message.message_id) : bodyViewer(bytes),
    traced && h("p", {}, h("a", { href: `#/trace/${encodeURIComponent(message.topic)}/${encodeURIComponent(message.message_id)}` }, "Message trace")),
  );
}

export async function render(view, args, ctx) {
  const topic = args[0];
  const described = await call("GET", path("v1", "topics", topic));
  const queues = described.queue_offsets;
  const detail = h("div");
  const results = h("div");

  const show = (message) => fill(detail, details(message, described.trace));

  const queue = h("select", { name: "queue" }, queues.map((q) => h("option", { value: q.queue }, String(q.queue))));
  const firstFull = queues.find((q) => q.max_offset > q.min_offset) || queues[0];
  if (firstFull) queue.value = String(firstFull.queue);
  const offset = h("input", { name: "offset", type: "number", min: 0, value: firstFull ? firstFull.min_offset : 0 });
  const at = h("input", { name: "time", type: "datetime-local", step: 1 });
  const max = h("input", { name: "max_messages", type: "number", min: 1, max: 1000, value: 20 });

  async function browse(from) {
    let start = from;
    const timestamp = utcInputMs(at);
    if (start === undefined && timestamp !== null) {
      const found = await call("GET", path("v1", "topics", topic, "offsets"), {
        query: { queue: queue.value, timestamp },
      });
      start = found.queues[0].timestamp_offset ?? found.queues[0].max_offset;
      offset.value = start;
      at.value = "";
    }
    if (start === undefined) start = Number(offset.value || 0);
    const page = await call("GET", path("v1", "topics", topic, "queues", queue.value, "messages"), {
      query: { offset: start, max_messages: max.value || 20 },
    });
    const rows = page.messages.map((m) => [
      num(m.offset),
      m.message_id,
      m.tag || "–",
      (m.keys || []).join(", "),
      time(m.stored_timestamp),
      preview(m),
      h("button", { type: "button", "aria-label": `Inspect message ${m.message_id}`, onclick: () => show(m) }, "Inspect"),
    ]);
    const more =
      page.next_offset < page.max_offset
        ? h("button", { type: "button", onclick: () => run(page.next_offset) }, "Next page")
        : null;
    fill(
      results,
      page.truncated ? h("p", { class: "muted" }, `Offsets before ${page.start_offset} are past retention.`) : null,
      table(
        `Messages of queue ${page.queue} from offset ${page.start_offset}`,
        ["Offset", "Message ID", "Tag", "Keys", "Stored", "Body", ""],
        rows,
        { empty: "No messages from this offset." },
      ),
      more,
    );
  }
  const run = (from) => browse(from).catch((error) => ctx.error(error));

  const browseForm = h(
    "form",
    { class: "inline", "aria-label": "Browse messages" },
    field("Queue", queue),
    field("Offset", offset),
    field("Or from time (UTC)", at),
    field("Max messages", max),
    h("button", { type: "submit", class: "primary" }, "Browse"),
  );
  browseForm.addEventListener("submit", (event) => {
    event.preventDefault();
    run();
  });

  const messageId = h("input", { name: "message_id", required: true, size: 34 });
  const lookupForm = h(
    "form",
    { class: "inline", "aria-label": "Look up a message" },
    field("Message ID", messageId),
    h("button", { type: "submit" }, "Look up"),
  );
  lookupForm.addEventListener("submit", async (event) => {
    event.preventDefault();
    try {
      show(await call("GET", path("v1", "topics", topic, "messages", messageId.value.trim())));
    } catch (error) {
      ctx.error(error);
    }
  });

  const key = h("input", { name: "key", required: true, size: 24 });
  let pageKey = "";
  async function findByKey(token) {
    const page = await call("GET", path("v1", "topics", topic, "messages"), {
      query: token ? { key: pageKey, page_token: token } : { key: key.value },
    });
    pageKey = page.key;
    const rows = page.messages.map((m) => [
      num(m.queue),
      num(m.offset),
      m.message_id,
      m.tag || "–",
      (m.keys || []).join(", "),
      time(m.stored_timestamp),
      preview(m),
      h("button", { type: "button", "aria-label": `Inspect message ${m.message_id}`, onclick: () => show(m) }, "Inspect"),
    ]);
    const more = page.next_page_token
      ? h("button", { type: "button", onclick: () => find(page.next_page_token) }, "Next page")
      : null;
    fill(
      results,
      table(`Messages with key ${page.key}, newest first`, ["Queue", "Offset", "Message ID", "Tag", "Keys", "Stored", "Body", ""], rows, {
        empty: page.next_page_token ? "None in this part of the retention: search on with Next page." : "No messages with this key.",
      }),
      more,
    );
  }
  const find = (token) => findByKey(token).catch((error) => ctx.error(error));
  const keyForm = h(
    "form",
    { class: "inline", "aria-label": "Find messages by key" },
    field("Key", key),
    h("button", { type: "submit" }, "Find by key"),
  );
  keyForm.addEventListener("submit", (event) => {
    event.preventDefault();
    find();
  });

  view.append(
    h("h2", {}, "Topic ", topic),
    facts([
      ["Type", described.message_type],
      ["Queues", String(described.queues)],
      ["Retention", `${described.retention_hours} h`],
      ["Message trace", described.trace ? "on" : "off"],
      ["Created", time(described.created_timestamp)],
    ]),
    table(
      "Queues",
      ["Queue", "Min offset", "Max offset", "Messages retained"],
      queues.map((q) => [num(q.queue), num(q.min_offset), num(q.max_offset), num(q.max_offset - q.min_offset)]),
    ),
    browseForm,
    lookupForm,
    keyForm,
    detail,
    results,
  );
  if (firstFull && firstFull.max_offset > firstFull.min_offset) await browse();
}
