// CIRRUS-HMAC-SHA256 request signing with WebCrypto (docs/AUTH-SPEC.md); the same
// algorithm as sdk/cirrusmq/signing.py, checked against it by tests/console.
export const ALGORITHM = "CIRRUS-HMAC-SHA256";
const encoder = new TextEncoder();

/** RFC 3986 percent-encoding of UTF-8 text: only A-Z a-z 0-9 - . _ ~ stay as they are. */
export function encodeRfc3986(text) {
  return encodeURIComponent(text).replace(
    /[!'()*]/g,
    (c) => "%" + c.charCodeAt(0).toString(16).toUpperCase(),
  );
}

function decodeQueryPart(text) {
  return decodeURIComponent(text.replace(/\+/g, " "));
}

function compare(a, b) {
  return a < b ? -1 : a > b ? 1 : 0;
}

/** The canonical form of a raw query string (without "?"): pairs decoded ("+" is a space),
 * re-encoded per RFC 3986, sorted by key then value, joined with "&". */
export function canonicalQuery(query) {
  if (!query) return "";
  const pairs = [];
  for (const part of query.split("&")) {
    if (!part) continue;
    const at = part.indexOf("=");
    const key = at < 0 ? part : part.slice(0, at);
    const value = at < 0 ? "" : part.slice(at + 1);
    pairs.push([encodeRfc3986(decodeQueryPart(key)), encodeRfc3986(decodeQueryPart(value))]);
  }
  pairs.sort((a, b) => compare(a[0], b[0]) || compare(a[1], b[1]));
  return pairs.map(([k, v]) => `${k}=${v}`).join("&");
}

function hex(buffer) {
  return Array.from(new Uint8Array(buffer), (b) => b.toString(16).padStart(2, "0")).join("");
}

/** Lowercase hex SHA-256 of the body bytes. */
export async function bodyHash(bytes) {
  return hex(await crypto.subtle.digest("SHA-256", bytes));
}

/** Milliseconds since the epoch as X-Cirrus-Date: UTC, ISO 8601 basic (20261123T010700Z). */
export function formatDate(ms) {
  const iso = new Date(ms).toISOString();
  return iso.replace(/[-:]/g, "").replace(/\.\d+Z$/, "Z");
}

/** 128 random bits, urlsafe base64 without padding (22 characters). */
export function newNonce() {
  const bytes = crypto.getRandomValues(new Uint8Array(16));
  return btoa(String.fromCharCode(...bytes))
    .replace(/\+/g, "-")
    .replace(/\//g, "_")
    .replace(/=+$/, "");
}

export async function stringToSign(method, path, query, date, nonce, body) {
  return [
    ALGORITHM,
    method.toUpperCase(),
    path || "/",
    canonicalQuery(query),
    date,
    nonce,
    await bodyHash(body),
  ].join("\n");
}

/** hex(HMAC-SHA256(secret, text)), both UTF-8. */
export async function signature(secretKey, text) {
  const key = await crypto.subtle.importKey(
    "raw",
    encoder.encode(secretKey),
    { name: "HMAC", hash: "SHA-256" },
    false,
    ["sign"],
  );
  return hex(await crypto.subtle.sign("HMAC", key, encoder.encode(text)));
}

/** The three headers that sign one request. `path` is percent-encoded as sent, `query` the
 * raw query string, `body` the exact bytes (a Uint8Array). `now` (ms) and `nonce` default
 * to the clock and a fresh nonce; pass them only to reproduce a signature. */
export async function sign(method, path, query, body, credentials, { now, nonce } = {}) {
  const date = formatDate(now ?? Date.now());
  const usedNonce = nonce ?? newNonce();
  const text = await stringToSign(method, path, query, date, usedNonce, body);
  const sig = await signature(credentials.secretKey, text);
  return {
    "X-Cirrus-Date": date,
    "X-Cirrus-Nonce": usedNonce,
    Authorization: `${ALGORITHM} Credential=${credentials.accessKey}, Signature=${sig}`,
  };
}
