// One session: its header (state, cost, tokens, links), its sub-agent tree, its tokens over time,
// and each turn as a waterfall of the spans the traces export (the tree from parent_id).

import {
  api,
  clock,
  compact,
  duration,
  el,
  exact,
  money,
  stateBadge,
  svg,
  throttled,
  timeEl,
  tokensOf,
  tokensTitle,
  whole,
} from "./util.js";

const TURNS = 50; // asked for first; "all" asks for the most the API gives
const MAX_TURNS = 500;
const OPEN_TURNS = 10; // the last ten turns are drawn open, older ones folded

function fact(term, ...value) {
  return el("div", { class: "fact" }, el("dt", {}, term), el("dd", {}, ...value));
}

function header(row, links) {
  const turns = row.turns || {};
  const turnCount = (turns.completed || 0) + (turns.interrupted || 0) + (turns.failed || 0);
  const tools = row.tool_calls || {};
  return el(
    "header",
    { class: "session-head" },
    el("h2", { id: "session-title" }, row.title || `untitled ${row.session_id.slice(0, 8)}`),
    el(
      "dl",
      { class: "facts" },
      fact(
        "State",
        stateBadge(row.state, row.reason),
        row.state !== "ended" && row.state_since ? " " : null,
        row.state !== "ended" && row.state_since ? timeEl(row.state_since, "for") : null,
      ),
      fact("Agent", row.agent, row.version ? el("span", { class: "muted" }, ` ${row.version}`) : null),
      fact("Project", el("span", { title: row.cwd || "" }, row.project || "–")),
      fact("Model", row.model || "–"),
      fact("Cost", money(row.cost_usd), row.reported_cost_usd != null ? el("span", { class: "muted" }, ` (agent says ${money(row.reported_cost_usd)})`) : null),
      fact("Tokens", el("span", { title: tokensTitle(row.tokens) }, compact(row.tokens_total ?? tokensOf(row.tokens)))),
      fact("Turns", whole(turnCount), turns.failed ? el("span", { class: "error-text" }, ` (${turns.failed} failed)`) : null),
      fact("Tool calls", whole(tools.total || 0), tools.error ? el("span", { class: "error-text" }, ` (${tools.error} failed)`) : null),
      fact("Started", row.started_at ? el("span", { title: exact(row.started_at) }, exact(row.started_at)) : "–"),
      fact("Last activity", timeEl(row.updated_at)),
      el("div", { class: "fact wide" }, el("dt", {}, "Session id"), el("dd", {}, el("code", {}, row.session_id))),
    ),
    links,
  );
}

// ---- sub-agents -------------------------------------------------------------------------

function subagentTree(row) {
  const subs = row.subagents || [];
  if (!subs.length) return null;
  const ids = new Set(subs.map((s) => s.id));
  const children = new Map();
  for (const sub of subs) {
    const parent = sub.parent_id && ids.has(sub.parent_id) ? sub.parent_id : null;
    if (!children.has(parent)) children.set(parent, []);
    children.get(parent).push(sub);
  }
  const list = (parent) => {
    const items = (children.get(parent) || []).slice().sort((a, b) => (a.started_at || "").localeCompare(b.started_at || ""));
    if (!items.length) return null;
    return el(
      "ul",
      {},
      ...items.map((sub) =>
        el(
          "li",
          { "data-subagent": sub.id },
          el(
            "div",
            { class: "sub" },
            el("span", { class: "sub-type" }, sub.type || "sub-agent"),
            sub.title ? el("span", { class: "sub-title" }, sub.title) : null,
            el("span", { class: `state s-${sub.state === "running" ? "running" : "ended"}` }, sub.state || "?"),
            sub.background ? el("span", { class: "muted" }, "background") : null,
            el("span", { class: "muted", title: tokensTitle(sub.tokens) }, `${compact(tokensOf(sub.tokens))} tokens`),
            el("span", { class: "muted" }, `${whole(sub.messages || 0)} responses, ${whole(sub.tool_calls || 0)} tool calls`),
            sub.started_at && sub.ended_at
              ? el("span", { class: "muted" }, duration(new Date(sub.ended_at) - new Date(sub.started_at)))
              : null,
          ),
          list(sub.id),
        ),
      ),
    );
  };
  return el(
    "section",
    { class: "subagents", "aria-labelledby": "h-subagents" },
    el("h3", { id: "h-subagents" }, `Sub-agents (${row.subagents_running || 0} running of ${subs.length})`),
    el("div", { class: "tree" }, el("div", { class: "sub lead" }, "lead"), list(null)),
  );
}

// ---- tokens over time ---------------------------------------------------------------------

function tokenChart(turns) {
  const points = [];
  for (const turn of turns) {
    for (const span of turn.spans || []) {
      if (span.operation === "chat" && span.tokens) points.push([span.end_ms, tokensOf(span.tokens)]);
    }
  }
  if (!points.some(([, n]) => n > 0)) return null;
  points.sort((a, b) => a[0] - b[0]);
  let sum = 0;
  const cumulative = points.map(([at, n]) => [at, (sum += n)]);
  const W = 640;
  const H = 120;
  const pad = { left: 8, right: 8, top: 10, bottom: 20 };
  const t0 = cumulative[0][0];
  const t1 = cumulative[cumulative.length - 1][0];
  const x = (t) => pad.left + (t1 > t0 ? ((t - t0) / (t1 - t0)) * (W - pad.left - pad.right) : (W - pad.left - pad.right) / 2);
  const y = (n) => H - pad.bottom - (sum ? (n / sum) * (H - pad.top - pad.bottom) : 0);
  let path = `M ${x(t0).toFixed(1)} ${y(0).toFixed(1)}`;
  for (const [at, n] of cumulative) path += ` H ${x(at).toFixed(1)} V ${y(n).toFixed(1)}`;
  const label = `Cumulative tokens over the ${turns.length} turns shown: ${whole(sum)} in ${points.length} model responses, from ${exact(t0)} to ${exact(t1)}`;
  return el(
    "section",
    { class: "tokens-chart", "aria-labelledby": "h-tokens" },
    el("h3", { id: "h-tokens" }, "Tokens over time"),
    svg(
      "svg",
      { viewBox: `0 0 ${W} ${H}`, role: "img", "aria-label": label, "data-total": String(sum), "data-points": String(points.length) },
      svg("title", {}, label),
      svg("line", { class: "axis", x1: pad.left, x2: W - pad.right, y1: y(0), y2: y(0) }),
      svg("path", { class: "area", d: `${path} V ${y(0).toFixed(1)} Z` }),
      svg("path", { class: "line", d: path }),
      ...cumulative.map(([at, n]) => svg("circle", { class: "dot", cx: x(at).toFixed(1), cy: y(n).toFixed(1), r: 2.5 }, svg("title", {}, `${clock(at)}: ${whole(n)} tokens`))),
      svg("text", { class: "tick", x: pad.left, y: H - 5 }, clock(t0)),
      svg("text", { class: "tick end", x: W - pad.right, y: H - 5 }, clock(t1) === clock(t0) ? `+${duration(t1 - t0)}` : clock(t1)),
      svg("text", { class: "tick", x: pad.left + 2, y: pad.top + 10 }, `${compact(sum)} tokens`),
    ),
  );
}

// ---- the waterfall ------------------------------------------------------------------------

/** The spans of a turn as a tree: children by parent_id, in start order; roots are the spans
 * whose parent is not in the turn. */
export function spanTree(spans) {
  const ids = new Set(spans.map((s) => s.span_id));
  const children = new Map();
  const roots = [];
  spans.forEach((span, index) => {
    const node = { span, index, children: [] };
    children.set(span.span_id, node);
  });
  for (const span of spans) {
    const node = children.get(span.span_id);
    if (span.parent_id && ids.has(span.parent_id) && span.parent_id !== span.span_id) children.get(span.parent_id).children.push(node);
    else roots.push(node);
  }
  const order = (a, b) => a.span.start_ms - b.span.start_ms || a.index - b.index;
  const sort = (nodes) => {
    nodes.sort(order);
    for (const node of nodes) sort(node.children);
  };
  sort(roots);
  return roots;
}

const SHOWN_ATTRIBUTES = /^(gen_ai\.(input|output)\.messages|gen_ai\.tool\.call\.(arguments|result))$/;

function attributeList(span) {
  const attrs = span.attributes || {};
  const keys = Object.keys(attrs).sort();
  return el(
    "dl",
    { class: "attrs" },
    fact("Start", exact(span.start_ms)),
    fact("Duration", duration(span.end_ms - span.start_ms)),
    span.tokens ? fact("Tokens", tokensTitle(span.tokens)) : null,
    ...keys.map((key) => {
      const value = attrs[key];
      const text = typeof value === "string" ? value : JSON.stringify(value);
      return fact(key, SHOWN_ATTRIBUTES.test(key) ? el("pre", {}, text) : text);
    }),
  );
}

function spanLine(node, depth, t0, t1, running, last) {
  const span = node.span;
  const total = Math.max(t1 - t0, 1);
  const left = Math.min(100, Math.max(0, ((span.start_ms - t0) / total) * 100));
  const width = Math.max(0.4, Math.min(100 - left, ((span.end_ms - span.start_ms) / total) * 100));
  const open = running && span.end_ms >= last - 1; // still open at the last record read
  const bar = el("div", {
    class: `bar op-${span.operation || "other"}${span.error ? " error" : ""}${open ? " open" : ""}`,
    title: `${span.name}: +${duration(span.start_ms - t0)}, ${duration(span.end_ms - span.start_ms)}`,
  });
  bar.style.left = `${left}%`;
  bar.style.width = `${width}%`;
  const details = el("div", { class: "span-details", hidden: true });
  const name = el(
    "button",
    {
      type: "button",
      class: "span-name",
      "aria-expanded": "false",
      onclick: () => {
        const show = details.hidden;
        if (show && !details.firstChild) details.append(attributeList(span));
        details.hidden = !show;
        name.setAttribute("aria-expanded", String(show));
      },
    },
    span.error ? el("span", { class: "error-mark", title: "error" }, "✕ ", el("span", { class: "visually-hidden" }, "error: ")) : null,
    open ? el("span", { class: "open-mark", title: "still running" }, "● ", el("span", { class: "visually-hidden" }, "running: ")) : null,
    el("span", { class: "span-label" }, span.name),
  );
  name.style.paddingLeft = `${0.3 + depth * 1.1}em`;
  const tokens = span.tokens ? tokensOf(span.tokens) : null;
  const line = el(
    "div",
    { class: "line" },
    name,
    el("div", { class: "track" }, bar),
    el("span", { class: "dur" }, duration(span.end_ms - span.start_ms)),
    el("span", { class: "tok", title: span.tokens ? tokensTitle(span.tokens) : "" }, tokens === null ? "" : compact(tokens)),
  );
  const item = el(
    "li",
    {
      class: `span${span.error ? " error" : ""}`,
      "data-depth": String(depth),
      "data-name": span.name,
      "data-operation": span.operation || "",
      "data-span-id": span.span_id,
    },
    line,
    details,
  );
  if (node.children.length) {
    item.append(el("ul", {}, ...node.children.map((c) => spanLine(c, depth + 1, t0, t1, running, last))));
  }
  return item;
}

function turnSection(turn, number, total) {
  const spans = turn.spans || [];
  const t0 = Math.min(turn.start_ms, ...spans.map((s) => s.start_ms));
  const last = Math.max(turn.end_ms, ...spans.map((s) => s.end_ms));
  const running = turn.outcome === "running";
  const tokens = tokensOf(turn.tokens);
  const summary = el(
    "summary",
    {},
    el("span", { class: "turn-no" }, `Turn ${whole(number)}`),
    el("span", { class: `outcome o-${turn.outcome}` }, turn.outcome),
    el("span", { class: "muted" }, turn.trigger === "continuation" ? "continuation" : "prompt"),
    el("time", { datetime: new Date(turn.start_ms).toISOString(), title: exact(turn.start_ms) }, clock(turn.start_ms)),
    el("span", {}, duration(last - t0)),
    el("span", { title: tokensTitle(turn.tokens) }, `${compact(tokens)} tokens`),
    turn.model ? el("span", { class: "muted" }, turn.model) : null,
  );
  const scale = el(
    "div",
    { class: "line scale", "aria-hidden": "true" },
    el("span", {}, "span"),
    el("div", { class: "track" }, el("span", { class: "t0" }, "0"), el("span", { class: "t1" }, duration(last - t0))),
    el("span", { class: "dur" }, "duration"),
    el("span", { class: "tok" }, "tokens"),
  );
  const tree = spanTree(spans);
  return el(
    "details",
    {
      class: `turn${running ? " running" : ""}`,
      open: number > total - OPEN_TURNS,
      "data-trace-id": turn.trace_id,
      "data-outcome": turn.outcome,
    },
    summary,
    turn.trace_url
      ? el("p", { class: "trace-link" }, el("a", { href: turn.trace_url, target: "_blank", rel: "noopener noreferrer" }, `Trace ${turn.trace_id.slice(0, 8)}… ↗`))
      : null,
    scale,
    el("ul", { class: "waterfall", "aria-label": `Spans of turn ${number}` }, ...tree.map((n) => spanLine(n, 0, t0, last, running, last))),
  );
}

function turnsSection(doc, more) {
  const turns = doc.turns || [];
  const total = doc.total ?? turns.length;
  const first = total - turns.length + 1;
  const note = total > turns.length ? ` (the last ${whole(turns.length)} of ${whole(total)})` : "";
  const older =
    total > turns.length && turns.length < MAX_TURNS
      ? el("button", { type: "button", class: "more", onclick: more }, `Show ${whole(Math.min(total, MAX_TURNS))} turns`)
      : null;
  return el(
    "section",
    { class: "turns", "aria-labelledby": "h-turns" },
    el("h3", { id: "h-turns" }, `Turns${note}`),
    doc.skipped_bytes
      ? el(
          "p",
          { class: "muted skipped" },
          `Earlier turns are left out: this session's files are long, and only their last 16 MiB ` +
            `were read (${whole(Math.round(doc.skipped_bytes / 1e6))} MB before them were not).`,
        )
      : null,
    older,
    turns.length ? null : el("p", { class: "muted" }, "No turns read yet."),
    ...turns.map((turn, i) => turnSection(turn, first + i, total)),
  );
}

// ---- the view ---------------------------------------------------------------------------

export function sessionView(main, agent, id, ctx) {
  const base = `api/sessions/${encodeURIComponent(agent)}/${encodeURIComponent(id)}`;
  const back = el("p", { class: "back" }, el("a", { href: ctx.back || "#/" }, "← All sessions"));
  const head = el("div", { class: "head-slot" }, el("p", {}, "Loading…"));
  const body = el("div", { class: "body-slot" });
  main.replaceChildren(back, head, body);
  let gone = false;
  let drawnRow = null;
  let turnsDoc = null;
  let renders = 0;
  let limit = TURNS;
  const showAll = () => {
    limit = MAX_TURNS;
    loadTurns();
  };

  function links(row) {
    if (!row.grafana_url) return null; // the trace links are on each turn
    return el(
      "p",
      { class: "links" },
      el("a", { href: row.grafana_url, target: "_blank", rel: "noopener noreferrer" }, "This session in Grafana ↗"),
    );
  }

  function drawHead(row) {
    const first = drawnRow === null;
    drawnRow = row;
    document.title = `${row.title || row.session_id} · coding-agent-exporter`;
    head.replaceChildren(header(row, links(row)));
    if (first && document.activeElement === main) {
      const title = head.querySelector("h2");
      title.tabIndex = -1;
      title.focus({ preventScroll: true }); // read out first, and Tab goes on from there
    }
  }

  function drawBody() {
    const parts = [];
    const subs = drawnRow ? subagentTree(drawnRow) : null;
    if (turnsDoc) {
      const chart = tokenChart(turnsDoc.turns || []);
      if (chart) parts.push(chart);
    }
    if (subs) parts.push(subs);
    if (turnsDoc) parts.push(turnsSection(turnsDoc, showAll));
    // keep the turns the reader opened or folded, by trace id
    const wasOpen = new Map([...body.querySelectorAll("details.turn")].map((d) => [d.dataset.traceId, d.open]));
    body.replaceChildren(...parts);
    for (const d of body.querySelectorAll("details.turn")) if (wasOpen.has(d.dataset.traceId)) d.open = wasOpen.get(d.dataset.traceId);
    main.dataset.rendered = `session-${++renders}`;
  }

  async function loadRow() {
    try {
      const row = await api(base);
      if (!gone) drawHead(row);
    } catch (error) {
      if (!gone) head.replaceChildren(el("h2", {}, "Session not found"), el("p", {}, error.message));
    }
  }

  async function loadTurns() {
    try {
      turnsDoc = await api(`${base}/turns?limit=${limit}`);
    } catch (error) {
      if (gone) return;
      turnsDoc = null;
      drawBody();
      body.append(el("p", { class: "muted" }, `The turns could not be read: ${error.message}`));
      return;
    }
    if (!gone) drawBody();
  }

  const turnsLater = throttled(loadTurns, 1000);
  const rowLater = throttled(loadRow, 200);
  const loaded = (async () => {
    await loadRow();
    if (!gone) await loadTurns();
  })();

  return {
    loaded,
    refresh() {
      rowLater();
      turnsLater();
    },
    onRows(rows) {
      const row = rows.find((r) => r.session_id === id && (!agent || r.agent === agent));
      if (!row) return;
      drawHead(row); // the event carries the whole row
      turnsLater();
    },
    destroy() {
      gone = true;
      turnsLater.cancel();
      rowLater.cancel();
      document.title = "coding-agent-exporter";
    },
  };
}
