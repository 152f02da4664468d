// The console's small helpers: DOM built from text only (never HTML), the JSON API, numbers and
// times (in the viewer's locale and time zone), and a throttle for live re-fetches.

const SVG = "http://www.w3.org/2000/svg";

function fill(node, attrs, children) {
  for (const [key, value] of Object.entries(attrs || {})) {
    if (value === null || value === undefined || value === false) continue;
    if (key === "class") node.setAttribute("class", value);
    else if (key === "text") node.textContent = String(value);
    else if (key.startsWith("on")) node.addEventListener(key.slice(2), value);
    else node.setAttribute(key, value === true ? "" : String(value));
  }
  for (const child of children.flat()) {
    if (child === null || child === undefined || child === false) continue;
    node.append(child instanceof Node ? child : String(child)); // a string becomes a text node
  }
  return node;
}

/** An HTML element: `el("a", {href: "#/", class: "x"}, "text", otherNode)`. */
export function el(tag, attrs, ...children) {
  return fill(document.createElement(tag), attrs, children);
}

/** An SVG element, the same way. */
export function svg(tag, attrs, ...children) {
  return fill(document.createElementNS(SVG, tag), attrs, children);
}

/** GET a JSON document from the exporter; an error carries the server's message and status. */
export async function api(path) {
  const response = await fetch(path, { credentials: "same-origin", cache: "no-store" });
  let doc = null;
  try {
    doc = await response.json();
  } catch {
    doc = null;
  }
  if (!response.ok) {
    const error = new Error((doc && doc.error) || `${path}: HTTP ${response.status}`);
    error.status = response.status;
    throw error;
  }
  return doc;
}

const COMPACT = new Intl.NumberFormat("en", { notation: "compact", maximumFractionDigits: 1 });
const WHOLE = new Intl.NumberFormat(undefined);

/** 1234567 → "1.2M"; the exact count goes in a title. */
export function compact(n) {
  return n === null || n === undefined ? "–" : COMPACT.format(n);
}

export function whole(n) {
  return n === null || n === undefined ? "–" : WHOLE.format(n);
}

/** "$0.42", "<$0.01", "$1,234.50". */
export function money(usd) {
  if (usd === null || usd === undefined) return "–";
  if (usd > 0 && usd < 0.005) return "<$0.01";
  return "$" + usd.toLocaleString("en", { minimumFractionDigits: 2, maximumFractionDigits: 2 });
}

/** The four kinds of tokens a row or span counts, added up. */
export function tokensOf(tokens) {
  if (!tokens) return 0;
  return (
    (tokens.input || 0) + (tokens.output || 0) + (tokens.cache_read || 0) + (tokens.cache_write || 0)
  );
}

export function tokensTitle(tokens) {
  if (!tokens) return "";
  return [
    `input ${whole(tokens.input || 0)}`,
    `output ${whole(tokens.output || 0)}`,
    `cache read ${whole(tokens.cache_read || 0)}`,
    `cache write ${whole(tokens.cache_write || 0)}`,
    tokens.reasoning ? `reasoning ${whole(tokens.reasoning)}` : null,
  ]
    .filter(Boolean)
    .join(", ");
}

/** 329 → "329 ms", 12345 → "12.3 s", 200000 → "3 min 20 s", 7.5 h → "7 h 30 min". */
export function duration(ms) {
  if (ms === null || ms === undefined || !isFinite(ms)) return "–";
  if (ms < 1000) return `${Math.round(ms)} ms`;
  const s = ms / 1000;
  if (s < 60) return `${s < 10 ? s.toFixed(2) : s.toFixed(1)} s`;
  const min = Math.floor(s / 60);
  if (min < 60) {
    const rest = Math.floor(s % 60);
    return rest ? `${min} min ${rest} s` : `${min} min`;
  }
  const h = Math.floor(min / 60);
  if (h < 48) return min % 60 ? `${h} h ${min % 60} min` : `${h} h`;
  return `${Math.floor(h / 24)} d`;
}

/** How long, coarsely: "<1 min", "3 min", "2 h", "5 d". */
export function ago(ms) {
  const s = Math.max(0, ms / 1000);
  if (s < 45) return "<1 min";
  const min = Math.round(s / 60);
  if (min < 60) return `${min} min`;
  const h = Math.round(min / 60);
  if (h < 36) return `${h} h`;
  return `${Math.round(h / 24)} d`;
}

const EXACT = new Intl.DateTimeFormat(undefined, {
  year: "numeric",
  month: "short",
  day: "numeric",
  hour: "2-digit",
  minute: "2-digit",
  second: "2-digit",
  timeZoneName: "short",
});
const CLOCK = new Intl.DateTimeFormat(undefined, {
  hour: "2-digit",
  minute: "2-digit",
  second: "2-digit",
});

/** The exact local time of an ISO string or epoch milliseconds, with its time zone. */
export function exact(at) {
  const date = at instanceof Date ? at : new Date(at);
  return isNaN(date) ? "" : EXACT.format(date);
}

export function clock(at) {
  const date = new Date(at);
  return isNaN(date) ? "" : CLOCK.format(date);
}

function relativeText(iso, mode) {
  const since = Date.now() - new Date(iso).getTime();
  const span = ago(since);
  if (mode === "for") return `for ${span}`;
  return span === "<1 min" ? "just now" : `${span} ago`;
}

/** `<time datetime=… title="exact local time">3 min ago</time>`, kept current by `tick`.
 * mode "ago" → "3 min ago", "for" → "for 3 min". */
export function timeEl(iso, mode = "ago") {
  if (!iso) return el("span", { class: "muted", text: "–" });
  return el("time", {
    datetime: iso,
    title: exact(iso),
    "data-rel": mode,
    text: relativeText(iso, mode),
  });
}

/** Re-render every relative time on the page from the local clock (no request is made). */
export function tick(root = document) {
  for (const node of root.querySelectorAll("time[data-rel]")) {
    node.textContent = relativeText(node.getAttribute("datetime"), node.dataset.rel);
  }
}

/** Call `fn` now if it has not run for `wait` ms, else once at the end of the wait; never two
 * at once (a call during a run schedules one more). */
export function throttled(fn, wait) {
  let timer = null;
  let last = -Infinity;
  let running = false;
  let again = false;
  async function run() {
    timer = null;
    if (running) {
      again = true;
      return;
    }
    running = true;
    last = performance.now();
    try {
      await fn();
    } catch (error) {
      console.error(error);
    } finally {
      running = false;
      if (again) {
        again = false;
        schedule();
      }
    }
  }
  function schedule() {
    if (timer !== null) return;
    timer = setTimeout(run, Math.max(0, last + wait - performance.now()));
  }
  schedule.cancel = () => {
    if (timer !== null) clearTimeout(timer);
    timer = null;
    again = false;
  };
  return schedule;
}

export const STATE_LABELS = {
  needs_user: "waiting",
  running: "running",
  background: "background",
  idle: "idle",
  ended: "ended",
};

/** A state badge: "waiting for you · permission prompt". */
export function stateBadge(state, reason) {
  return el(
    "span",
    { class: `state s-${state}` },
    STATE_LABELS[state] || state,
    reason ? el("span", { class: "reason", text: ` · ${reason}` }) : null,
  );
}

export function sessionHref(agent, id) {
  return `#/session/${encodeURIComponent(agent)}/${encodeURIComponent(id)}`;
}
