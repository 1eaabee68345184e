// Open transactions of a producer group: commit or roll back by hand.
import { call, path } from "./api.js";
import { field, h, num, table, time } from "./dom.js";

function picker(ctx, group) {
  const name = h("input", { name: "producer_group", required: true, value: group || "" });
  const form = h(
    "form",
    { class: "inline", "aria-label": "Show transactions" },
    field("Producer group", name),
    h("button", { type: "submit", class: "primary" }, "Show transactions"),
  );
  form.addEventListener("submit", (event) => {
    event.preventDefault();
    ctx.go(`#/transactions/${encodeURIComponent(name.value.trim())}`);
  });
  return form;
}

async function resolve(group, txn, resolution, ctx) {
  const verb = resolution === "COMMIT" ? "Commit" : "Roll back";
  if (!window.confirm(`${verb} transaction ${txn.transaction_id}?`)) return;
  try {
    const result = await call(
      "POST",
      path("v1", "producer-groups", group, "transactions", txn.transaction_id, "resolve"),
      { body: { resolution } },
    );
    ctx.go(`#/transactions/${encodeURIComponent(group)}`);
    ctx.status(`Transaction ${result.transaction_id}: ${result.state}${result.changed ? "" : " (already decided)"}.`);
  } catch (error) {
    ctx.error(error);
  }
}

export async function render(view, args, ctx) {
  const group = args[0];
  view.append(h("h2", {}, "Transactions"), picker(ctx, group));
  if (!group) return;
  const { transactions } = await call("GET", path("v1", "producer-groups", group, "transactions"));
  view.append(
    table(
      `Open transactions of ${group}`,
      ["Transaction ID", "Transactional ID", "Topic", "State", "Age", "Messages", "Checks", "Next check", ""],
      transactions.map((t) => [
        t.transaction_id,
        t.transactional_id,
        t.topic,
        t.state,
        `${Math.round(t.age_seconds)} s`,
        num(t.message_count),
        `${t.checks} / ${t.max_checks}`,
        time(t.next_check_timestamp),
        h(
          "span",
          {},
          h("button", { type: "button", "aria-label": `Commit ${t.transaction_id}`, onclick: () => resolve(group, t, "COMMIT", ctx) }, "Commit"),
          " ",
          h("button", { type: "button", class: "danger", "aria-label": `Roll back ${t.transaction_id}`, onclick: () => resolve(group, t, "ROLLBACK", ctx) }, "Roll back"),
        ),
      ]),
      { empty: "No open transactions." },
    ),
  );
}
