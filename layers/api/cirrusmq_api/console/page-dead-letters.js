// Dead letters of a group: list with reason and attempts, inspect, redrive selected or
// all, purge.
import { call, path } from "./api.js";
import { base64ToBytes, bodyLine, bodyViewer, facts, fill, h, num, table, time } from "./dom.js";
import { groupPicker, listedGroups } from "./page-groups.js";

const MAX_CALLS = 100; // a redrive is resumable: call until done, within reason

async function redrive(group, messageIds) {
  let redriven = 0;
  let skipped = 0;
  let start;
  for (let calls = 0; calls < MAX_CALLS; calls++) {
    const body = { max_messages: 100 };
    if (messageIds) body.message_ids = messageIds;
    if (start !== undefined) body.start = start;
    const result = await call("POST", path("v1", "groups", group, "dead-letters", "redrive"), { body });
    redriven += result.redriven;
    skipped += result.skipped;
    start = result.next_offset;
    if (result.done) break;
  }
  return { redriven, skipped };
}

function inspect(letter) {
  const bytes = base64ToBytes(letter.body_preview);
  return h(
    "section",
    { class: "panel", "aria-label": "Dead letter details" },
    h("h3", {}, "Dead letter ", letter.message_id),
    facts([
      ["Origin", `${letter.origin_topic ?? "–"} queue ${letter.origin_queue ?? "–"} offset ${letter.origin_offset ?? "–"}`],
      ["Failed deliveries", String(letter.delivery_attempts)],
      ["Reason", letter.reason || "–"],
      ["Dead since", time(letter.stored_timestamp)],
      ["Born", time(letter.born_timestamp)],
      ["Tag", letter.tag || "–"],
      ["Keys", (letter.keys || []).join(", ") || "–"],
      ["Redriven", letter.redriven ? "yes" : "no"],
      ["Size", `${letter.body_bytes} bytes${letter.body_bytes > bytes.length ? ` (first ${bytes.length} shown)` : ""}`],
    ]),
    bodyViewer(bytes, "Dead letter body"),
  );
}

async function renderGroup(view, group, ctx) {
  const listing = h("div");
  const detail = h("div");
  let selected = new Set();

  const load = async (start = 0) => {
    const page = await call("GET", path("v1", "groups", group, "dead-letters"), { query: { start, limit: 100 } });
    selected = new Set();
    const rows = page.dead_letters.map((d) => [
      h("input", {
        type: "checkbox",
        "aria-label": `Select ${d.message_id}`,
        onchange: (event) => (event.target.checked ? selected.add(d.message_id) : selected.delete(d.message_id)),
      }),
      num(d.dlq_offset),
      d.message_id,
      `${d.origin_topic ?? "–"} / ${d.origin_queue ?? "–"} / ${d.origin_offset ?? "–"}`,
      num(d.delivery_attempts),
      d.reason || "–",
      time(d.stored_timestamp),
      d.redriven ? "yes" : "no",
      { value: bodyLine(base64ToBytes(d.body_preview), 60), class: "preview" },
      h("button", { type: "button", "aria-label": `Inspect dead letter ${d.message_id}`, onclick: () => fill(detail, inspect(d)) }, "Inspect"),
    ]);
    fill(
      listing,
      table(
        "Dead letters",
        ["", "DLQ offset", "Message ID", "Origin topic / queue / offset", "Attempts", "Reason", "Dead since", "Redriven", "Body", ""],
        rows,
        { empty: "No dead letters." },
      ),
      page.next_start !== null && page.next_start !== undefined
        ? h("button", { type: "button", onclick: () => load(page.next_start).catch((e) => ctx.error(e)) }, "Next page")
        : null,
    );
  };

  const act = (fn) => async () => {
    try {
      const message = await fn();
      if (message === null) return;
      await load();
      ctx.status(message);
    } catch (error) {
      ctx.error(error);
    }
  };
  const redriveSelected = act(async () => {
    if (!selected.size) {
      ctx.error("Select the dead letters to redrive first.");
      return null;
    }
    const result = await redrive(group, [...selected]);
    return `Redrove ${result.redriven} dead letter(s)${result.skipped ? `, skipped ${result.skipped} whose topic is gone` : ""}.`;
  });
  const redriveAll = act(async () => {
    const result = await redrive(group, undefined);
    return `Redrove ${result.redriven} dead letter(s)${result.skipped ? `, skipped ${result.skipped} whose topic is gone` : ""}.`;
  });
  const purge = act(async () => {
    if (!window.confirm(`Purge every dead letter of ${group}?`)) return null;
    const result = await call("POST", path("v1", "groups", group, "dead-letters", "purge"), { body: {} });
    return `Purged: dead letters below offset ${result.floor} are gone.`;
  });

  await load();
  view.append(
    h("h2", {}, "Dead letters of ", group),
    h(
      "div",
      { class: "actions" },
      h("button", { type: "button", class: "primary", onclick: redriveSelected }, "Redrive selected"),
      h("button", { type: "button", onclick: redriveAll }, "Redrive all"),
      h("button", { type: "button", class: "danger", onclick: purge }, "Purge"),
      h("a", { href: `#/groups/${encodeURIComponent(group)}` }, "Group ", group),
    ),
    listing,
    detail,
  );
}

export async function render(view, args, ctx) {
  if (args[0]) return renderGroup(view, args[0], ctx);
  const known = await listedGroups(); // suggested in the picker
  const having = await Promise.all(
    known.map((group) =>
      call("GET", path("v1", "groups", group, "dead-letters"), { query: { limit: 1 } }).then(
        (page) => page.dead_letters.length > 0,
        () => false, // refused (dead letters are an admin's) or gone
      ),
    ),
  );
  const groups = known.filter((_, i) => having[i]);
  fill(
    view,
    h("h2", {}, "Dead letters"),
    table(
      "Groups with dead letters",
      ["Group", ""],
      groups.map((g) => [g, h("a", { href: `#/dead-letters/${encodeURIComponent(g)}`, "aria-label": `Dead letters of ${g}` }, "Open")]),
      { empty: "No group this key may see has dead letters." },
    ),
    groupPicker("Group name", "Show dead letters", "#/dead-letters", ctx, known),
  );
}
