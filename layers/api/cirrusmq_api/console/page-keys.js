// Access keys: list (never their secrets), create with permissions, disable / enable, delete.
import { call, path } from "./api.js";
import { checkbox, field, fill, h, table, time } from "./dom.js";

function patterns(text) {
  return text.split(/[\s,]+/).filter(Boolean);
}

export function describePermissions(p) {
  if (p.admin) return "admin";
  const parts = [];
  if (p.publish.length) parts.push(`publish: ${p.publish.join(", ")}`);
  for (const grant of p.subscribe) parts.push(`subscribe: groups ${grant.groups.join(", ")} on topics ${grant.topics.join(", ")}`);
  return parts.join("; ") || "none";
}

function createForm(ctx, created) {
  const description = h("input", { name: "description" });
  const admin = checkbox("Admin (everything, keys included)", { name: "admin" });
  const publish = h("input", { name: "publish", placeholder: "orders, billing-*" });
  // subscribe grants: a (groups, topics) pair each; "Add subscribe grant" adds a pair
  const grants = [];
  const grantFields = h("span", { class: "grants" });
  const addGrant = () => {
    const suffix = grants.length ? ` (grant ${grants.length + 1})` : "";
    const groups = h("input", { name: "subscribe_groups", placeholder: "billing" });
    const topics = h("input", { name: "subscribe_topics", placeholder: "orders" });
    grants.push({ groups, topics });
    grantFields.append(field(`Subscribe as groups${suffix}`, groups), field(`Subscribe to topics${suffix}`, topics));
  };
  addGrant();
  const form = h(
    "form",
    { class: "inline", "aria-label": "Create access key" },
    field("Description", description),
    admin,
    field("Publish to topics", publish),
    grantFields,
    h("button", { type: "button", onclick: addGrant }, "Add subscribe grant"),
    h("button", { type: "submit", class: "primary" }, "Create key"),
  );
  form.addEventListener("submit", async (event) => {
    event.preventDefault();
    const permissions = { admin: admin.querySelector("input").checked, publish: patterns(publish.value), subscribe: [] };
    for (const { groups, topics } of grants) {
      if (groups.value.trim() || topics.value.trim()) {
        permissions.subscribe.push({ groups: patterns(groups.value), topics: patterns(topics.value) });
      }
    }
    try {
      const key = await call("POST", "/v1/keys", { body: { permissions, description: description.value } });
      keepCreated = true;
      fill(
        created,
        h(
          "section",
          { class: "panel", "aria-label": "New access key" },
          h("p", {}, "Created access key ", h("strong", {}, key.access_key), " (", describePermissions(key.permissions), ")."),
          h("p", {}, "Secret key (shown only now; store it safely): ", h("span", { class: "secret" }, key.secret_key)),
        ),
      );
      ctx.go("#/keys");
    } catch (error) {
      ctx.error(error);
    }
  });
  return form;
}

async function act(method, target, message, ctx, confirmText) {
  if (confirmText && !window.confirm(confirmText)) return;
  try {
    await call(method, target);
    ctx.go("#/keys");
    ctx.status(message);
  } catch (error) {
    ctx.error(error);
  }
}

const created = document.createElement("div"); // the new secret, shown once after a create
let keepCreated = false;

export async function render(view, _args, ctx) {
  if (!keepCreated) created.replaceChildren();
  keepCreated = false;
  const { keys } = await call("GET", "/v1/keys");
  const rows = keys.map((k) => {
    const active = k.status === "ACTIVE";
    return [
      k.access_key,
      k.description || "–",
      k.status,
      describePermissions(k.permissions),
      time(k.created_timestamp),
      h(
        "span",
        {},
        h(
          "button",
          {
            type: "button",
            "aria-label": `${active ? "Disable" : "Enable"} key ${k.access_key}`,
            onclick: () =>
              act("POST", path("v1", "keys", k.access_key, active ? "disable" : "enable"), `${active ? "Disabled" : "Enabled"} ${k.access_key}.`, ctx),
          },
          active ? "Disable" : "Enable",
        ),
        " ",
        h(
          "button",
          {
            type: "button",
            class: "danger",
            "aria-label": `Delete key ${k.access_key}`,
            onclick: () => act("DELETE", path("v1", "keys", k.access_key), `Deleted ${k.access_key}.`, ctx, `Delete access key ${k.access_key}?`),
          },
          "Delete",
        ),
      ),
    ];
  });
  view.append(
    h("h2", {}, "Access keys"),
    createForm(ctx, created),
    created,
    table("Access keys", ["Access key", "Description", "Status", "Permissions", "Created", ""], rows),
  );
}
