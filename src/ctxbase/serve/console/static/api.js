// The REST API with the key of this tab (sessionStorage), sent as the API's Bearer header.

const KEY = "ctxbase.apiKey";

export class ApiError extends Error {
  constructor(status, body) {
    const msg = body && body.error ? body.error.message : `HTTP ${status}`;
    super(msg);
    this.status = status;
    this.body = body;
  }
}

export class ServerDown extends Error {
  constructor(cause) {
    super("the server did not answer (is ctxbase serve still running?); "
      + "reload the page once it is back");
    this.cause = cause;
  }
}

export const auth = {
  get key() { return sessionStorage.getItem(KEY); },
  set key(v) { if (v) sessionStorage.setItem(KEY, v); else sessionStorage.removeItem(KEY); },
};

export async function api(path, { method = "GET", query, body } = {}) {
  let url = path;
  if (query) {
    const qs = new URLSearchParams();
    for (const [k, v] of Object.entries(query)) {
      if (v === undefined || v === null || v === "") continue;
      for (const one of Array.isArray(v) ? v : [v]) qs.append(k, String(one));
    }
    const text = qs.toString();
    if (text) url += "?" + text;
  }
  const headers = { Accept: "application/json" };
  if (auth.key) headers.Authorization = `Bearer ${auth.key}`;
  if (body !== undefined) headers["Content-Type"] = "application/json";
  let res;
  try {
    res = await fetch(url, {
      method, headers, body: body === undefined ? undefined : JSON.stringify(body),
    });
  } catch (err) {
    // no answer at all (the server stopped, the network is down): say so, not the
    // browser's "TypeError: Failed to fetch"
    throw new ServerDown(err);
  }
  const data = res.status === 204 ? null : await res.json().catch(() => null);
  if (!res.ok) throw new ApiError(res.status, data);
  return data;
}

export const p = (pid) => `/v1/projects/${encodeURIComponent(pid)}`;
