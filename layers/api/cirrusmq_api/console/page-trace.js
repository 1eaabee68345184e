// Message trace: a message's events (sent, delivered, nacked, acked, ...) as a timeline, by
// topic and message id (GET /v1/topics/{topic}/messages/{message_id}/trace). Every field
// goes in as text.
import { call, path } from "./api.js";
import { facts, field, h, time } from "./dom.js";

const KIND_TITLES = {
  sent: "Sent",
  scheduled: "Scheduled (delayed)",
  released: "Released (delay over)",
  committed: "Committed",
  rolled_back: "Rolled back",
  delivered: "Delivered",
  nacked: "Nacked",
  expired: "Lease expired",
  moved_to_retry: "Moved to retry",
  dead_lettered: "Dead-lettered",
  redriven: "Redriven",
  acked: "Acked",
};

/** The event's fields worth showing, as [label, text] pairs (absent ones left out). */
function eventFacts(event) {
  const pairs = [
    ["Queue / offset", event.queue !== undefined ? `${event.queue} / ${event.offset ?? "–"}` : null],
    ["Lease topic", event.lease_topic && event.lease_topic !== event.topic ? event.lease_topic : null],
    ["Group", event.group],
    ["Consumer client", event.client_id],
    ["Producer", event.producer_id],
    ["Attempt", event.attempt],
    ["Invisible until", event.invisible_until ? time(event.invisible_until) : null],
    ["Delivery time", event.delivery_timestamp ? time(event.delivery_timestamp) : null],
    ["Moved to", event.target_topic],
    ["Reason", event.reason],
    ["Transaction", event.transaction_id],
  ];
  return pairs.filter(([, value]) => value !== null && value !== undefined && value !== "").map(([k, v]) => [k, String(v)]);
}

function timeline(messageId, events) {
  return h(
    "ol",
    { class: "timeline", "aria-label": `Trace of message ${messageId}` },
    events.map((event) =>
      h(
        "li",
        { class: `event ${event.kind}` },
        h(
          "div",
          { class: "event-head" },
          h("time", { datetime: new Date(event.time).toISOString() }, time(event.time)),
          " ",
          h("strong", { class: "kind", "data-kind": event.kind }, KIND_TITLES[event.kind] || event.kind),
          event.attempt ? h("span", { class: "muted" }, ` (attempt ${event.attempt})`) : null,
        ),
        facts(eventFacts(event)),
      ),
    ),
  );
}

function picker(topic, messageId, ctx) {
  const topicInput = h("input", { name: "topic", required: true, value: topic || "" });
  const idInput = h("input", { name: "message_id", required: true, size: 34, value: messageId || "" });
  const form = h(
    "form",
    { class: "inline", "aria-label": "Trace a message" },
    field("Topic", topicInput),
    field("Message ID", idInput),
    h("button", { type: "submit", class: "primary" }, "Trace"),
  );
  form.addEventListener("submit", (event) => {
    event.preventDefault();
    const target = [topicInput.value.trim(), idInput.value.trim()].map(encodeURIComponent);
    ctx.go(`#/trace/${target[0]}/${target[1]}`);
  });
  return form;
}

export async function render(view, args, ctx) {
  const [topic, messageId] = args;
  view.append(
    h("h2", {}, "Message trace"),
    h("p", { class: "muted" }, "What happened to a message of a topic with trace on: sent, delivered, acked, retried, dead-lettered…"),
    picker(topic, messageId, ctx),
  );
  if (!topic || !messageId) return;
  const trace = await call("GET", path("v1", "topics", topic, "messages", messageId, "trace"));
  view.append(
    h("h3", {}, "Message ", trace.message_id, " of ", h("a", { href: `#/topics/${encodeURIComponent(trace.topic)}` }, trace.topic)),
    trace.events.length
      ? timeline(trace.message_id, trace.events)
      : h("p", { class: "muted" }, "No events of this message that this key may see."),
  );
}
