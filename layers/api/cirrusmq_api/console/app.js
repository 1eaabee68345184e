// The console's shell: sign-in, navigation (#/page/argument) and the status regions.
import { ApiError, clearCredentials, loadCredentials, saveCredentials, verify } from "./api.js";
import { field, fill, h } from "./dom.js";
import * as deadLetters from "./page-dead-letters.js";
import * as groups from "./page-groups.js";
import * as keys from "./page-keys.js";
import * as messages from "./page-messages.js";
import * as topics from "./page-topics.js";
import * as trace from "./page-trace.js";
import * as transactions from "./page-transactions.js";

const PAGES = [
  { id: "topics", title: "Topics", module: topics },
  { id: "groups", title: "Groups", module: groups },
  { id: "dead-letters", title: "Dead letters", module: deadLetters },
  { id: "transactions", title: "Transactions", module: transactions },
  { id: "trace", title: "Message trace", module: trace },
  { id: "keys", title: "Access keys", module: keys },
];

const $ = (id) => document.getElementById(id);
let renderCount = 0;

export function describeError(error) {
  if (error instanceof ApiError) return `${error.message} (${error.code}, HTTP ${error.status})`;
  return String((error && error.message) || error);
}

const ctx = {
  status(message) {
    fill($("alert"));
    fill($("status"), message);
  },
  error(error) {
    fill($("status"));
    fill($("alert"), describeError(error));
  },
  clear() {
    fill($("status"));
    fill($("alert"));
  },
  go(hash) {
    if (location.hash === hash) render();
    else location.hash = hash;
  },
};

function decoded(part) {
  try {
    return decodeURIComponent(part);
  } catch {
    return null; // a bad %-escape ("#/topics/%")
  }
}

function route() {
  const parts = location.hash.replace(/^#\/?/, "").split("/").map(decoded);
  if (parts.includes(null)) return { page: "topics", module: topics, args: [], invalid: true };
  const [page, ...args] = parts;
  // "#/topics/NAME" is the topic's messages page
  if (page === "topics" && args[0]) return { page: "topics", module: messages, args };
  const found = PAGES.find((p) => p.id === page) || PAGES[0];
  return { page: found.id, module: found.module, args };
}

function signInView() {
  $("nav").hidden = true;
  fill($("session"));
  const accessKey = h("input", { name: "access_key", autocomplete: "username", required: true });
  const secretKey = h("input", {
    name: "secret_key",
    type: "password",
    autocomplete: "current-password",
    required: true,
  });
  const button = h("button", { type: "submit", class: "primary" }, "Sign in");
  const form = h(
    "form",
    { class: "stacked", "aria-label": "Sign in" },
    field("Access key", accessKey),
    field("Secret key", secretKey),
    button,
    h("p", { class: "muted" }, "The secret key stays in this tab (session storage); requests are signed here and carry only the access key and a signature."),
  );
  form.addEventListener("submit", async (event) => {
    event.preventDefault();
    const credentials = { accessKey: accessKey.value.trim(), secretKey: secretKey.value };
    button.disabled = true;
    try {
      await verify(credentials);
      saveCredentials(credentials);
      ctx.clear();
      if (!location.hash) location.hash = "#/topics";
      render();
    } catch (error) {
      const wrongKey = error instanceof ApiError && (error.status === 401 || error.status === 403);
      ctx.error(
        wrongKey
          ? `Sign-in refused: the access key or secret key is wrong or disabled. ${describeError(error)}`
          : `Sign-in failed: ${describeError(error)}`,
      );
    } finally {
      button.disabled = false;
    }
  });
  fill($("main"), h("section", { class: "signin" }, h("h2", {}, "Sign in"), form));
  accessKey.focus();
}

function renderNav(current, credentials) {
  const nav = $("nav");
  nav.hidden = false;
  fill(
    nav,
    PAGES.map((p) =>
      h("a", { href: `#/${p.id}`, "aria-current": p.id === current ? "page" : undefined }, p.title),
    ),
  );
  fill(
    $("session"),
    h("span", {}, "Signed in as ", h("strong", {}, credentials.accessKey)),
    h(
      "button",
      {
        type: "button",
        onclick: () => {
          clearCredentials();
          ctx.clear();
          signInView();
        },
      },
      "Sign out",
    ),
  );
}

export async function render() {
  const credentials = loadCredentials();
  if (!credentials) {
    signInView();
    return;
  }
  const { page, module, args, invalid } = route();
  renderNav(page, credentials);
  const main = $("main");
  const mine = ++renderCount;
  fill(main, h("p", { class: "muted" }, "Loading…"));
  try {
    const view = h("div");
    await module.render(view, args, ctx);
    if (mine !== renderCount) return; // a newer navigation wins
    fill(main, view);
    if (invalid) ctx.error(`${location.hash} is not a valid link (a bad %-escape): the topics are shown instead.`);
  } catch (error) {
    if (mine !== renderCount) return;
    fill(main);
    ctx.error(error);
  }
}

window.addEventListener("hashchange", () => {
  ctx.clear();
  render();
});
render();
