// The console's entry: key entry when the server wants one, the header, and hash routing.

import { api, ApiError, auth, ServerDown } from "./api.js";
import { clear, h, link, parseHash } from "./dom.js";
import { projectsPage, sessionsPage } from "./pages/projects.js";
import { timelinePage } from "./pages/timeline.js";
import { chainPage } from "./pages/chain.js";
import { graphPage } from "./pages/graph.js";
import { contextsPage, tracePage } from "./pages/contexts.js";
import { diffPage } from "./pages/diff.js";
import { searchPage } from "./pages/search.js";

const view = document.getElementById("view");
const loginBox = document.getElementById("login");
let me = null;

const TABS = [["sessions", "Sessions"], ["graph", "Graph"], ["contexts", "Contexts"],
  ["search", "Search"]];

function header(pid, active) {
  const nav = clear(document.getElementById("tabs"));
  if (pid) {
    nav.append(h("a", { href: link(["p", pid]), class: "project" }, pid), " ");
    for (const [key, label] of TABS) {
      const parts = key === "sessions" ? ["p", pid] : ["p", pid, key];
      nav.append(h("a", { href: link(parts), class: key === active ? "active" : "" }, label));
    }
  }
  const who = clear(document.getElementById("who"));
  if (me) {
    const name = me.key_id ? `key ${me.key_id} (${me.role})` : "no auth (local)";
    who.append(name);
    if (me.key_id) {
      who.append(h("button", { type: "button", id: "sign-out", onclick: () => {
        auth.key = null; me = null; start();
      } }, "Sign out"));
    }
  }
}

async function route() {
  const { parts, query } = parseHash(location.hash);
  const [first, pid, kind, a, b] = parts;
  let active = "sessions";
  let page;
  if (first !== "p" || !pid) page = () => projectsPage(view);
  else if (!kind) page = () => sessionsPage(view, pid);
  else if (kind === "s") page = () => timelinePage(view, pid, a, query);
  else if (kind === "e") page = () => chainPage(view, pid, a);
  else if (kind === "graph") { active = "graph"; page = () => graphPage(view, pid, query); }
  else if (kind === "contexts") { active = "contexts"; page = () => contextsPage(view, pid, query); }
  else if (kind === "c") { active = "contexts"; page = () => tracePage(view, pid, a); }
  else if (kind === "diff") { active = "contexts"; page = () => diffPage(view, pid, a, b); }
  else if (kind === "search") { active = "search"; page = () => searchPage(view, pid, query); }
  else page = async () => {  // a link to a page that does not exist says so
    clear(view).append(h("p", { class: "error", role: "alert", id: "page-error" },
      `No such page: #/${parts.join("/")}`), h("p", {}, h("a", { href: link(["p", pid]) },
      `Sessions of ${pid}`)));
  };
  header(first === "p" ? pid : null, active);
  clear(view).append(h("p", { class: "muted" }, "Loading…"));
  try {
    await page();
  } catch (err) {
    if (err instanceof ApiError && err.status === 401) {
      // the key was revoked meanwhile: the header must not go on naming it
      auth.key = null;
      me = null;
      header(null);
      showLogin(err.message);
      return;
    }
    clear(view).append(h("p", { class: "error", role: "alert", id: "page-error" },
      err instanceof ApiError ? `${err.status}: ${consoleWords(err.message)}`
        : err instanceof ServerDown ? err.message : String(err)));
  }
}

// The API's advice (pass new_project, GET /v1/whoami) is for callers of the API; here an
// unknown project is a typo in a link, and the Projects page lists the ones there are
function consoleWords(message) {
  return message
    .replace(/; pass new_project to answer for a project with no data yet/,
      "; pick one from the Projects page")
    .replace(/GET \/v1\/whoami lists the projects it may use/,
      "the Projects page lists the ones it may use");
}

function showLogin(message) {
  view.hidden = true;
  loginBox.hidden = false;
  document.getElementById("login-error").textContent = message || "";
  document.getElementById("api-key").focus();
}

document.getElementById("login-form").addEventListener("submit", async (ev) => {
  ev.preventDefault();
  auth.key = document.getElementById("api-key").value.trim();
  await start();
});

async function start() {
  try {
    me = await api("/v1/whoami");
  } catch (err) {
    if (err instanceof ApiError && err.status === 401) {
      const tried = auth.key;
      auth.key = null;
      header(null);
      showLogin(tried ? err.message : "");
      return;
    }
    clear(view).append(h("p", { class: "error", role: "alert", id: "page-error" },
      err instanceof ServerDown ? err.message : `The server did not answer: ${err.message || err}`));
    return;
  }
  loginBox.hidden = true;
  view.hidden = false;
  document.getElementById("api-key").value = "";
  await route();
}

window.addEventListener("hashchange", () => { if (me) route(); });
start();
