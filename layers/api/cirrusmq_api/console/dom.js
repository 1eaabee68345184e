// DOM helpers. Every text goes in as a text node (never parsed as HTML), so a message body
// such as "<script>" shows as the characters it is.

/** An element: attributes ("on*" are listeners), then children (nodes or text). */
export function h(tag, attrs = {}, ...children) {
  const el = document.createElement(tag);
  for (const [key, value] of Object.entries(attrs || {})) {
    if (value === undefined || value === null || value === false) continue;
    if (key.startsWith("on")) el.addEventListener(key.slice(2), value);
    else if (key === "class") el.className = value;
    else if (key === "value") el.value = String(value);
    else if (key === "checked") el.checked = Boolean(value);
    else el.setAttribute(key, value === true ? "" : String(value));
  }
  append(el, children);
  return el;
}

function append(el, children) {
  for (const child of children.flat(Infinity)) {
    if (child === null || child === undefined || child === false) continue;
    el.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
}

/** Replace an element's children. */
export function fill(el, ...children) {
  el.replaceChildren();
  append(el, children);
  return el;
}

let fieldCount = 0;

function labelled(control) {
  if (!control.id) control.id = `field-${++fieldCount}`;
  return control.id;
}

/** A control with its label (label for=id: the label's text is the control's name). */
export function field(label, control) {
  return h("div", { class: "field" }, h("label", { for: labelled(control) }, label), control);
}

/** A checkbox and its label; `attrs` go on the input. */
export function checkbox(label, attrs = {}) {
  const input = h("input", { type: "checkbox", ...attrs });
  return h("div", { class: "field check" }, input, h("label", { for: labelled(input) }, label));
}

/** A table with a caption; `rows` are arrays of cells (text, nodes, or {value, class}). */
export function table(caption, headers, rows, { empty = "None." } = {}) {
  const head = h("tr", {}, headers.map((t) => h("th", { scope: "col" }, t)));
  const body = rows.length
    ? rows.map((cells) =>
        h(
          "tr",
          {},
          cells.map((cell) =>
            cell && typeof cell === "object" && !(cell instanceof Node) && "value" in cell
              ? h("td", { class: cell.class }, cell.value)
              : h("td", {}, cell),
          ),
        ),
      )
    : [h("tr", {}, h("td", { colspan: headers.length, class: "muted" }, empty))];
  // wrapped: a wide table scrolls on its own on a narrow screen, the page does not
  return h(
    "div",
    { class: "table-scroll" },
    h("table", {}, h("caption", {}, caption), h("thead", {}, head), h("tbody", {}, body)),
  );
}

export function num(value) {
  return { value: value === null || value === undefined ? "–" : String(value), class: "num" };
}

export function time(ms) {
  if (ms === null || ms === undefined) return "–";
  return new Date(ms).toISOString().replace("T", " ").replace(/\.\d+Z$/, " UTC");
}

export function facts(pairs) {
  return h("dl", { class: "facts" }, pairs.map(([k, v]) => [h("dt", {}, k), h("dd", {}, v)]));
}

// ---------------------------------------------------------------- message bodies
export function base64ToBytes(text) {
  const binary = atob(text || "");
  return Uint8Array.from(binary, (c) => c.charCodeAt(0));
}

export function bytesAsText(bytes) {
  return new TextDecoder("utf-8", { fatal: false }).decode(bytes);
}

export function bytesAsJson(bytes) {
  try {
    return JSON.stringify(JSON.parse(new TextDecoder("utf-8", { fatal: true }).decode(bytes)), null, 2);
  } catch {
    return "(not JSON)";
  }
}

export function bytesAsHex(bytes) {
  const lines = [];
  for (let at = 0; at < bytes.length; at += 16) {
    const row = bytes.slice(at, at + 16);
    const hexes = Array.from(row, (b) => b.toString(16).padStart(2, "0")).join(" ");
    const ascii = Array.from(row, (b) => (b >= 32 && b < 127 ? String.fromCharCode(b) : ".")).join("");
    lines.push(`${at.toString(16).padStart(8, "0")}  ${hexes.padEnd(47)}  ${ascii}`);
  }
  return lines.join("\n");
}

/** One line of a body for a table cell (text, at most `max` characters); control
 * characters show as \xNN escapes, never as themselves. */
export function bodyLine(bytes, max = 80) {
  const text = bytesAsText(bytes)
    .replace(/[\t\n\r ]+/g, " ")
    .replace(/[\x00-\x1f\x7f-\x9f]/g, (c) => `\\x${c.charCodeAt(0).toString(16).padStart(2, "0")}`);
  return text.length > max ? text.slice(0, max) + "…" : text;
}

/** A large body (its own S3 object) in one line for a table cell: its size and the start of
 * its SHA-256; the body itself is never fetched. */
export function largeBodyLine(large) {
  const digest = large.sha256 ? `, sha256 ${large.sha256.slice(0, 16)}…` : "";
  return `large body ${large.size} B${digest}`;
}

/** A large body's facts and a "Download" link to its presigned GET (only an http(s) URL is
 * made a link); the page never loads the body. */
export function largeBodyView(large, name) {
  const url = typeof large.url === "string" && /^https?:\/\//.test(large.url) ? large.url : null;
  return h(
    "div",
    { class: "large-body", "aria-label": "Large body" },
    facts([
      ["SHA-256", large.sha256 || "–"],
      ["Object key", large.key],
    ]),
    url
      ? h("p", {}, h("a", { href: url, download: name, rel: "noopener noreferrer" }, `Download (${large.size} bytes)`))
      : h("p", { class: "muted" }, "No download link for this body."),
    h("p", { class: "muted" }, "The link is valid for an hour after this page looked the message up."),
  );
}

/** A body viewer: a "Body view" select (Text / JSON / Hex) over a <pre> of text. */
export function bodyViewer(bytes, label = "Message body") {
  const pre = h("pre", { "aria-label": label, tabindex: "0" });
  const views = { text: bytesAsText, json: bytesAsJson, hex: bytesAsHex };
  const select = h(
    "select",
    { onchange: () => (pre.textContent = views[select.value](bytes)) },
    h("option", { value: "text" }, "Text"),
    h("option", { value: "json" }, "JSON"),
    h("option", { value: "hex" }, "Hex"),
  );
  pre.textContent = views.text(bytes);
  return h("div", {}, field("Body view", select), pre);
}

/** Read a datetime-local input (taken as UTC) as ms since the epoch, or null. */
export function utcInputMs(input) {
  return input.value ? Date.parse(input.value + "Z") : null;
}
