// Topics: the ones this key may see, with queues, offsets, retention and type; create, delete.
import { call, path } from "./api.js";
import { field, h, num, table, time } from "./dom.js";

const TYPES = ["NORMAL", "FIFO", "DELAY", "TRANSACTION"];

function offsetsOf(description) {
  const queues = (description && description.queue_offsets) || [];
  const written = queues.reduce((sum, q) => sum + q.max_offset, 0);
  const kept = queues.reduce((sum, q) => sum + (q.max_offset - q.min_offset), 0);
  return { written, kept };
}

function createForm(ctx) {
  const name = h("input", { name: "name", required: true });
  const queues = h("input", { name: "queues", type: "number", min: 1, placeholder: "default" });
  const type = h("select", { name: "message_type" }, TYPES.map((t) => h("option", { value: t }, t)));
  const retention = h("input", { name: "retention_hours", type: "number", min: 1, placeholder: "default" });
  const form = h(
    "form",
    { class: "inline", "aria-label": "Create topic" },
    field("Name", name),
    field("Queues", queues),
    field("Type", type),
    field("Retention (hours)", retention),
    h("button", { type: "submit", class: "primary" }, "Create topic"),
  );
  form.addEventListener("submit", async (event) => {
    event.preventDefault();
    const body = { name: name.value.trim(), message_type: type.value };
    if (queues.value) body.queues = Number(queues.value);
    if (retention.value) body.retention_hours = Number(retention.value);
    try {
      await call("POST", "/v1/topics", { body });
      ctx.go("#/topics");
      ctx.status(`Created topic ${body.name}.`);
    } catch (error) {
      ctx.error(error);
    }
  });
  return form;
}

async function remove(name, ctx) {
  if (!window.confirm(`Delete topic ${name}? Its messages are purged.`)) return;
  try {
    await call("DELETE", path("v1", "topics", name));
    ctx.go("#/topics");
    ctx.status(`Deleted topic ${name}.`);
  } catch (error) {
    ctx.error(error);
  }
}

export async function render(view, _args, ctx) {
  const { topics } = await call("GET", "/v1/topics");
  const described = await Promise.all(
    topics.slice(0, 200).map((t) => call("GET", path("v1", "topics", t.name)).catch(() => null)),
  );
  const rows = topics.map((t, i) => {
    const offsets = described[i] ? offsetsOf(described[i]) : { written: null, kept: null };
    return [
      h("a", { href: `#/topics/${encodeURIComponent(t.name)}` }, t.name),
      t.message_type,
      num(t.queues),
      num(offsets.written),
      num(offsets.kept),
      `${t.retention_hours} h`,
      t.trace ? "yes" : "no", // message trace on (absent from the API: off)
      time(t.created_timestamp),
      h(
        "button",
        { type: "button", class: "danger", "aria-label": `Delete topic ${t.name}`, onclick: () => remove(t.name, ctx) },
        "Delete",
      ),
    ];
  });
  view.append(
    h("h2", {}, "Topics"),
    createForm(ctx),
    table(
      "Topics this key may see",
      ["Topic", "Type", "Queues", "Messages written", "Messages retained", "Retention", "Traced", "Created", ""],
      rows,
      { empty: "No topics this key may see." },
    ),
  );
}
