// The console: a router (#/ the sessions, #/session/<agent>/<id> one session), the live link
// (one EventSource on /api/events: a view re-fetches what it shows when a changed row matters to
// it; nothing is polled) and the sessions view.

import { sessionView } from "./session.js";
import {
  api,
  compact,
  el,
  money,
  sessionHref,
  stateBadge,
  STATE_LABELS,
  throttled,
  tick,
  timeEl,
  tokensTitle,
  whole,
} from "./util.js";

const PAGE = 100;
const FILTERS = ["agent", "project", "state"];
const STATE_ORDER = ["needs_user", "running", "background", "idle", "ended"];
const GROUPS = { ...STATE_LABELS, needs_user: "waiting for you" };
const main = document.getElementById("main");
const liveNote = document.getElementById("live");
const catchingUp = document.getElementById("catching-up");
export const status = {
  ready: true,
  capture_content: false,
  grafana_url: null,
  trace_url: null,
  telemetry_path: "/metrics",
};
let view = null; // the view shown: {loaded, onRows(rows), refresh(), destroy()}
let routed = null; // the address the view shown was made for
let renders = 0; // sessions views drawn: main[data-rendered] (the tests and bench/console.py wait for it)
let lastList = "#/"; // the sessions view's address, for the session view's way back

// ---- the sessions view ------------------------------------------------------------------

/** The sessions view's query, from the address: #/?history=1&agent=…&q=…&offset=100 */
function listQuery(search) {
  const params = new URLSearchParams(search);
  const query = {
    history: params.get("history") === "1",
    q: params.get("q") || "",
    offset: Math.max(0, parseInt(params.get("offset") || "0", 10) || 0),
  };
  for (const name of FILTERS) query[name] = params.get(name) || "";
  return query;
}

function listAddress(query) {
  const params = new URLSearchParams();
  if (query.history) params.set("history", "1");
  for (const name of FILTERS) if (query[name]) params.set(name, query[name]);
  if (query.q) params.set("q", query.q);
  if (query.offset) params.set("offset", String(query.offset));
  const text = params.toString();
  return text ? `#/?${text}` : "#/";
}

function apiQuery(query) {
  const params = new URLSearchParams({ limit: String(PAGE), offset: String(query.offset) });
  if (query.history) params.set("history", "1");
  for (const name of FILTERS) if (query[name]) params.append(name, query[name]);
  if (query.q) params.set("q", query.q);
  return `api/sessions?${params}`;
}

/** Whether a row (from an event) belongs to the page's filters: then the page may change. */
function matches(row, query) {
  if (!query.history && !row.live) return false;
  for (const name of FILTERS) if (query[name] && row[name] !== query[name]) return false;
  if (query.q) {
    const q = query.q.toLowerCase();
    const title = (row.title || "").toLowerCase();
    if (!title.includes(q) && !row.session_id.toLowerCase().includes(q)) return false;
  }
  return true;
}

const COLUMNS = [
  ["state", "State"],
  ["agent", "Agent"],
  ["project", "Project"],
  ["title", "Title"],
  ["model", "Model"],
  ["turns", "Turns"],
  ["tokens", "Tokens"],
  ["cost", "Cost"],
  ["subagents", "Sub-agents"],
  ["activity", "Last activity"],
];

function cell(key, ...content) {
  const label = COLUMNS.find(([k]) => k === key)[1];
  return el("td", { class: `c-${key}`, "data-label": label }, ...content);
}

function sessionRow(row) {
  const href = sessionHref(row.agent, row.session_id);
  const turns = row.turns || {};
  const turnCount = (turns.completed || 0) + (turns.interrupted || 0) + (turns.failed || 0);
  const title = row.title || `untitled ${row.session_id.slice(0, 8)}`;
  const running = row.subagents_running || 0;
  const total = row.subagents_total ?? (row.subagents || []).length;
  const tr = el(
    "tr",
    { class: `row s-${row.state}`, "data-agent": row.agent, "data-session": row.session_id },
    cell(
      "state",
      stateBadge(row.state, row.reason),
      row.state !== "ended" && row.state_since ? " " : null,
      row.state !== "ended" && row.state_since ? timeEl(row.state_since, "for") : null,
    ),
    cell("agent", row.agent),
    cell("project", el("span", { class: "clip", title: row.cwd || row.project || "" }, row.project || "–")),
    cell(
      "title",
      el("a", { href, class: row.title ? "clip" : "clip muted", title: `${title}\n${row.session_id}` }, title),
    ),
    cell("model", row.model || "–"),
    cell(
      "turns",
      el("span", {
        title: `${whole(turns.completed || 0)} completed, ${whole(turns.interrupted || 0)} interrupted, ${whole(turns.failed || 0)} failed`,
        text: whole(turnCount),
      }),
    ),
    cell("tokens", el("span", { title: tokensTitle(row.tokens), text: compact(row.tokens_total) })),
    cell(
      "cost",
      el("span", {
        title:
          row.reported_cost_usd !== null && row.reported_cost_usd !== undefined
            ? `the agent reported ${money(row.reported_cost_usd)}`
            : "priced from the tokens",
        text: money(row.cost_usd),
      }),
    ),
    cell(
      "subagents",
      total
        ? el("span", {
            class: running ? "busy" : "",
            title: `${running} running of ${total}`,
            text: `${running}/${total}`,
          })
        : el("span", { class: "muted", text: "–" }),
    ),
    cell("activity", timeEl(row.updated_at)),
  );
  tr.addEventListener("click", (event) => {
    if (event.target.closest("a, button") || getSelection().toString()) return;
    location.hash = href;
  });
  return tr;
}

function optionList(select, name, facet, chosen) {
  const counts = facet || {};
  const names = Object.keys(counts).sort((a, b) =>
    name === "state" ? STATE_ORDER.indexOf(a) - STATE_ORDER.indexOf(b) : a.localeCompare(b),
  );
  if (chosen && !names.includes(chosen)) names.unshift(chosen);
  const all = { agent: "All agents", project: "All projects", state: "All states" }[name];
  select.replaceChildren(
    el("option", { value: "" }, all),
    ...names.map((value) =>
      el(
        "option",
        { value, selected: value === chosen },
        `${name === "state" ? GROUPS[value] || value : value} (${whole(counts[value] || 0)})`,
      ),
    ),
  );
  select.value = chosen;
}

/** The filter bar: Live / History, a menu per filter, the search box. `go(changes, replace)`
 * applies a change; `draw(doc, query)` sets the controls from an answer. */
function filterBar(query, go) {
  const modes = el("div", { class: "modes", role: "group", "aria-label": "Which sessions" });
  for (const [past, label] of [
    [false, "Live"],
    [true, "History"],
  ]) {
    const button = el("button", { type: "button", "data-mode": past ? "history" : "live" }, label);
    button.addEventListener("click", () => go({ history: past, offset: 0 }));
    modes.append(button);
  }
  const selects = {};
  for (const name of FILTERS) {
    selects[name] = el("select", { id: `f-${name}`, name });
    selects[name].addEventListener("change", (e) => go({ [name]: e.target.value, offset: 0 }));
  }
  const search = el("input", {
    id: "f-q",
    type: "search",
    name: "q",
    placeholder: "Title or session id",
    autocomplete: "off",
    value: query.q,
  });
  let typing = null;
  search.addEventListener("input", () => {
    clearTimeout(typing);
    typing = setTimeout(() => go({ q: search.value.trim(), offset: 0 }, true), 200);
  });
  const label = (name, control) =>
    el("label", { for: control.id }, el("span", { class: "label" }, name), control);
  const form = el(
    "form",
    { class: "filters", role: "search", onsubmit: (e) => e.preventDefault() },
    modes,
    ...FILTERS.map((name) => label(name[0].toUpperCase() + name.slice(1), selects[name])),
    label("Search", search),
  );
  return {
    form,
    draw(doc, now) {
      for (const name of FILTERS) optionList(selects[name], name, doc.facets && doc.facets[name], now[name]);
      for (const button of modes.children) {
        button.setAttribute("aria-pressed", String((button.dataset.mode === "history") === now.history));
      }
      if (search.value.trim() !== now.q && document.activeElement !== search) search.value = now.q;
    },
    stop: () => clearTimeout(typing),
  };
}

/** The rows in groups, one `tbody` per state, each headed by its name. */
function rowGroups(rows) {
  const groups = [];
  for (const row of rows) {
    if (!groups.length || groups[groups.length - 1].dataset.state !== row.state) {
      const head = el("th", { scope: "rowgroup", colspan: String(COLUMNS.length) }, GROUPS[row.state] || row.state);
      groups.push(el("tbody", { class: `group s-${row.state}`, "data-state": row.state }, el("tr", { class: "group-head" }, head)));
    }
    groups[groups.length - 1].append(sessionRow(row));
  }
  return groups;
}

/** "1–100 of 10,000 sessions", or what to do when there are none. */
function summaryOf(doc, query) {
  const rows = doc.sessions || [];
  const total = doc.total || 0;
  if (!rows.length) {
    const filtered = FILTERS.some((n) => query[n]) || query.q ? " match these filters" : "";
    const text = `${query.history ? "No sessions" : "No live sessions"}${filtered}.`;
    if (query.history) return [text];
    return [text, " ", el("a", { href: listAddress({ ...query, history: true, offset: 0 }) }, "Show the history")];
  }
  const states = doc.facets && doc.facets.state;
  const known = states ? Object.values(states).reduce((a, b) => a + b, 0) : null;
  const what = `${query.history ? "" : "live "}session${total === 1 ? "" : "s"}`;
  return [
    `${whole(query.offset + 1)}–${whole(query.offset + rows.length)} of ${whole(total)} ${what}`,
    known !== null && known !== total ? ` (${whole(known)} before filters)` : "",
  ];
}

function sessionsView(search) {
  let query = listQuery(search);
  let shown = new Set(); // "agent\u0000id" of the rows on the page
  let facets = {};
  let generation = 0;
  const go = (changes, replace = false) => {
    performance.mark("console-asked"); // a filter, a search or a page changed (bench/console.py)
    query = { ...query, ...changes };
    const address = listAddress(query);
    lastList = address;
    if (replace) history.replaceState(null, "", address);
    else history.pushState(null, "", address);
    routed = address;
    refresh();
  };
  const bar = filterBar(query, go);
  const summary = el("p", { class: "summary", id: "summary" }, "Loading…");
  const table = el(
    "table",
    { class: "sessions", "aria-describedby": "summary" },
    el("caption", { class: "visually-hidden" }, "Sessions, waiting for you first"),
    el("thead", {}, el("tr", {}, ...COLUMNS.map(([key, label]) => el("th", { scope: "col", class: `c-${key}` }, label)))),
  );
  const prev = el("button", { type: "button" }, "← Newer");
  prev.addEventListener("click", () => go({ offset: Math.max(0, query.offset - PAGE) }));
  const next = el("button", { type: "button" }, "Older →");
  next.addEventListener("click", () => go({ offset: query.offset + PAGE }));
  const pageNote = el("span", { class: "page-note" });
  const pager = el("nav", { class: "pager", "aria-label": "Pages" }, prev, pageNote, next);
  main.replaceChildren(el("h2", { class: "visually-hidden" }, "Sessions"), bar.form, summary, el("div", { class: "table-wrap" }, table), pager);

  function draw(doc) {
    const rows = doc.sessions || [];
    const total = doc.total || 0;
    facets = doc.facets || {};
    shown = new Set(rows.map((r) => `${r.agent}\u0000${r.session_id}`));
    bar.draw(doc, query);
    for (const body of table.querySelectorAll("tbody")) body.remove();
    table.append(...rowGroups(rows));
    summary.replaceChildren(...summaryOf(doc, query));
    const waiting = (facets.state && facets.state.needs_user) || 0;
    document.title = `${waiting ? `(${whole(waiting)} waiting) ` : ""}coding-agent-exporter`;
    prev.disabled = query.offset <= 0;
    next.disabled = query.offset + rows.length >= total;
    pageNote.textContent = total > PAGE ? `page ${Math.floor(query.offset / PAGE) + 1} of ${Math.ceil(total / PAGE)}` : "";
    pager.hidden = total <= PAGE && query.offset === 0;
    main.dataset.rendered = String(++renders);
    performance.mark("console-rendered");
  }

  async function refresh() {
    const mine = ++generation;
    let doc;
    try {
      doc = await api(apiQuery(query));
    } catch (error) {
      if (mine === generation) summary.replaceChildren(`Could not load the sessions: ${error.message}`);
      return;
    }
    if (mine !== generation) return; // a newer query was asked for meanwhile
    performance.mark("console-fetched");
    if (doc.total && query.offset >= doc.total) {
      go({ offset: Math.floor((doc.total - 1) / PAGE) * PAGE }, true);
      return;
    }
    draw(doc);
  }

  // a row naming an agent, project or state the menus do not offer yet: they need it
  const unknown = (row) =>
    (query.history || row.live) && FILTERS.some((n) => facets[n] && row[n] != null && !(row[n] in facets[n]));
  const later = throttled(refresh, 200);
  return {
    loaded: refresh(),
    refresh: later,
    onRows(rows) {
      const matters = (r) => shown.has(`${r.agent}\u0000${r.session_id}`) || matches(r, query) || unknown(r);
      if (rows.some(matters)) later();
    },
    destroy() {
      later.cancel();
      bar.stop();
      generation++;
    },
  };
}

// ---- routing --------------------------------------------------------------------------

function route() {
  const hash = location.hash || "#/";
  // "#main" is the skip link's; a popstate and a hashchange may come for one move
  if (!hash.startsWith("#/") || hash === routed) return;
  routed = hash;
  const from = view;
  if (view) view.destroy();
  const session = /^#\/session\/([^/]*)\/(.+)$/.exec(hash); // no agent: the id alone
  if (session) {
    view = sessionView(main, decodeURIComponent(session[1]), decodeURIComponent(session[2]), {
      status,
      back: lastList,
    });
  } else {
    const search = hash.startsWith("#/?") ? hash.slice(3) : "";
    lastList = listAddress(listQuery(search));
    view = sessionsView(search);
  }
  if (from) {
    scrollTo(0, 0);
    main.focus({ preventScroll: true }); // a keyboard user goes on from the new view
  }
}

// ---- the live link ----------------------------------------------------------------------

let source = null;

function showLive(state) {
  liveNote.dataset.state = state;
  liveNote.querySelector(".text").textContent = {
    live: "live",
    connecting: "connecting…",
    reconnecting: "reconnecting…",
  }[state];
}

function showReady(ready) {
  const changed = ready !== status.ready;
  status.ready = ready;
  catchingUp.hidden = ready;
  return changed;
}

function connect() {
  source = new EventSource("api/events");
  source.addEventListener("hello", (event) => {
    const doc = JSON.parse(event.data);
    showLive("live");
    showReady(Boolean(doc.ready));
    view.refresh(); // what changed since the view's fetch (or while away) was not pushed
  });
  source.addEventListener("reset", (event) => {
    // the catch-up ended, the state was read again, or this stream fell behind: fetch again
    showLive("live");
    showReady(Boolean(JSON.parse(event.data).ready));
    view.refresh();
  });
  source.addEventListener("rows", (event) => {
    const doc = JSON.parse(event.data);
    showLive("live");
    if (showReady(Boolean(doc.ready))) view.refresh();
    view.onRows(doc.rows || []);
  });
  source.addEventListener("error", () => {
    showLive("reconnecting");
    if (source.readyState === EventSource.CLOSED) {
      // the server refused the stream (503: too many, or it is going away): try again later
      setTimeout(connect, 5000);
    }
  });
}

async function start() {
  const asked = api("api/status").then(
    (doc) => Object.assign(status, doc),
    (error) => console.warn("no api/status:", error.message),
  );
  document.querySelector(".skip").addEventListener("click", (event) => {
    event.preventDefault();
    main.focus();
  });
  addEventListener("hashchange", route);
  addEventListener("popstate", route);
  route();
  showLive("connecting");
  await asked;
  showReady(status.ready !== false);
  const metrics = document.getElementById("metrics-link");
  metrics.href = (status.telemetry_path || "/metrics").replace(/^\//, ""); // relative: a proxy's prefix stays
  if (status.version) document.getElementById("version").textContent = `v${status.version}`;
  // the stream is opened once the first view is drawn: its start would slow that first fetch
  await view.loaded.catch(() => null);
  connect();
  setInterval(() => tick(), 15000); // relative times, from the local clock
}

start();
