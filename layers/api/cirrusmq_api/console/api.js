// The signed JSON API, called from the browser. The credentials live in this tab's
// sessionStorage; only the access key id and a signature go over the wire.
import { encodeRfc3986, sign } from "./signing.js";

const STORAGE_KEY = "cirrusmq.console.credentials";
let clockOffsetMs = 0; // the service's clock minus this browser's (from RequestExpired)

export class ApiError extends Error {
  constructor(status, code, message, details) {
    super(message);
    this.status = status;
    this.code = code;
    this.details = details || {};
  }
}

export function loadCredentials() {
  try {
    const stored = JSON.parse(sessionStorage.getItem(STORAGE_KEY) || "null");
    return stored && stored.accessKey && stored.secretKey ? stored : null;
  } catch {
    return null;
  }
}

export function saveCredentials(credentials) {
  sessionStorage.setItem(STORAGE_KEY, JSON.stringify(credentials));
}

export function clearCredentials() {
  sessionStorage.removeItem(STORAGE_KEY);
}

/** "/v1/topics/a b/messages" from ["v1", "topics", "a b", "messages"]. */
export function path(...segments) {
  return "/" + segments.map((s) => encodeRfc3986(String(s))).join("/");
}

function queryString(query) {
  const params = new URLSearchParams();
  for (const [key, value] of Object.entries(query || {})) {
    if (value !== undefined && value !== null && value !== "") params.append(key, String(value));
  }
  return params.toString();
}

async function send(credentials, method, target, query, body, mayRetry) {
  const qs = queryString(query);
  const bytes = body === undefined ? new Uint8Array() : new TextEncoder().encode(JSON.stringify(body));
  const headers = await sign(method, target, qs, bytes, credentials, {
    now: Date.now() + clockOffsetMs,
  });
  if (body !== undefined) headers["Content-Type"] = "application/json";
  const response = await fetch(target + (qs ? "?" + qs : ""), {
    method,
    headers,
    body: body === undefined ? undefined : bytes,
    credentials: "omit",
    cache: "no-store",
  });
  const text = await response.text();
  let data = null;
  try {
    data = text ? JSON.parse(text) : null;
  } catch {
    data = null;
  }
  if (response.ok) return data;
  const error = new ApiError(
    response.status,
    (data && data.code) || `HTTP${response.status}`,
    (data && data.message) || `the service answered HTTP ${response.status}`,
    data && data.details,
  );
  const serverTime = error.details.server_time;
  if (mayRetry && error.code === "RequestExpired" && Number.isInteger(serverTime)) {
    clockOffsetMs = serverTime - Date.now(); // sign on the service's clock from now on
    return send(credentials, method, target, query, body, false);
  }
  throw error;
}

/** One signed call with the stored credentials; resolves to the JSON answer. */
export function call(method, target, { query, body } = {}) {
  const credentials = loadCredentials();
  if (!credentials) {
    return Promise.reject(new ApiError(401, "NotSignedIn", "sign in first"));
  }
  return send(credentials, method, target, query, body, true);
}

/** Check credentials with one harmless signed read (the topics the key may see). */
export function verify(credentials) {
  return send(credentials, "GET", "/v1/topics", undefined, undefined, true);
}
