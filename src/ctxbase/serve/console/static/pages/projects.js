// Projects, and the sessions of one project.

import { api, p } from "../api.js";
import { clear, fmtTime, h, link, table } from "../dom.js";

export async function projectsPage(view) {
  const { projects } = await api("/v1/projects");
  clear(view).append(h("h1", {}, "Projects"));
  if (!projects.length) {
    // a key of some projects sees only those: the database may hold others
    const me = await api("/v1/whoami");
    const scoped = me && Array.isArray(me.projects);
    view.append(h("p", { class: "muted" }, scoped
      ? `No project this key may read holds data yet (its projects: ${me.projects.join(", ")}).`
      : "No project holds data yet."));
    return;
  }
  view.append(h("div", { class: "grid", id: "projects" }, projects.map((pid) =>
    h("a", { class: "card project-card", href: link(["p", pid]) }, h("strong", {}, pid)))));
}

export async function sessionsPage(view, pid) {
  const sessions = await api(`${p(pid)}/sessions`);
  clear(view).append(h("h1", {}, `Sessions of ${pid}`));
  if (!sessions.length) {
    view.append(h("p", { class: "muted" }, "No sessions in this project."));
    return;
  }
  const rows = sessions.map((x) => h("tr", {
    class: "clickable session-row", dataset: { session: x.session_id },
    onclick: () => { location.hash = link(["p", pid, "s", x.session_id]); },
  },
  h("td", {}, h("a", { href: link(["p", pid, "s", x.session_id]) }, x.session_id)),
  h("td", {}, x.title || ""), h("td", {}, x.status), h("td", {}, fmtTime(x.created_at)),
  h("td", {}, fmtTime(x.updated_at))));
  view.append(table(["session", "title", "status", "created", "updated"], rows,
    { id: "sessions" }));
}
