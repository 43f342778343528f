// The run as swimlanes: one lane per actor, one bar per request and its reply.
//
// A port of reactive_rag/cli/_timeline.py (`reactive-rag replay RUN_ID --timeline` draws
// the same in a terminal). The rules, briefly: a request opens a bar in the lane of the
// actor that answers it, a reply it declares whose `cause` is the request's seq closes it
// (`*.failed`, `actor.failed`, `verify.failed`: failed); a call id asked again, or a
// repair answer, is a retry and a failed or lost earlier attempt becomes "retried";
// a search reply's `provider_calls` add a bar per provider; a bar with no reply when
// the events stop is "open" (or "cancelled" if the run was cancelled); overlapping
// bars of a lane go to separate rows.
//
// Which events are requests, who answers them and with which replies is not written
// here: the server serves it (GET /v1/events/replies), built from the event classes'
// own declarations (streams.reply_table, which the Python timeline reads too).

let REQUESTS = {};  // request type -> {handled_by, replies, failures, ...}
let loaded = false;
let loading = null;

/** Fetch the request -> reply table (once; again after a failure). Resolves to whether it is here. */
export function loadReplies() {
  if (loaded) return Promise.resolve(true);
  if (!loading) {
    const signal = typeof AbortSignal.timeout === "function" ? AbortSignal.timeout(10_000) : undefined;
    loading = fetch("/v1/events/replies", { cache: "no-store", signal })
      .then((resp) => (resp.ok ? resp.json() : Promise.reject(new Error(`HTTP ${resp.status}`))))
      .then((body) => { REQUESTS = (body && body.requests) || {}; loaded = true; return true; })
      .catch(() => { loading = null; return false; });  // no table: no bars until it comes
  }
  return loading;
}

/** Whether the request -> reply table has come from the server. */
export function repliesLoaded() { return loaded; }

await loadReplies();

const LANE_ORDER = ["planner", "searcher", "search:", "scraper", "reader", "reranker", "selector",
  "writer", "verifier", "finalizer"];

function laneRank(name) {
  const i = LANE_ORDER.findIndex((p) => name === p || (p.endsWith(":") && name.startsWith(p)));
  return i < 0 ? LANE_ORDER.length : i;
}

function label(ev) {
  for (const key of ["query", "url", "chunk_id"]) if (ev[key]) return String(ev[key]);
  if (ev.type === "plan.requested") return `round ${ev.round}`;
  if (ev.type === "answer.requested") return `${ev.mode || "answer"} #${ev.attempt || 1}`;
  return ev.type.split(".")[0];
}

function errorText(ev) {
  if (ev.error) return `${ev.error.kind}: ${ev.error.message}`;
  const n = Array.isArray(ev.errors) ? ev.errors.length : 0;
  return n ? `${n} claims rejected` : ev.type;
}

/** Lanes, bars and budget gauges from a run's events (in seq order). */
export function buildTimeline(events) {
  if (!events.length) return { lanes: [], bars: [], gauges: [], duration: 0, outcome: null, t0: 0 };
  const t0 = events[0].ts;
  const bars = [];
  const open = new Map();  // request seq -> {index, replies, failures, key}
  const lastByKey = new Map();
  const attempts = new Map();
  let finished = null;
  for (const ev of events) {
    const at = ev.ts - t0;
    if (ev.type === "run.finished") finished = ev;
    else if (ev.type === "run.resumed") finished = null;
    close(ev, at, bars, open);
    const spec = REQUESTS[ev.type];
    if (!spec) continue;
    let lane = spec.handled_by;
    if (ev.type === "answer.requested" && ev.mode === "finalize") lane = "finalizer";
    const key = ev.call_id ? `${ev.type}#${ev.call_id}` : "";
    let attempt = ev.type === "answer.requested" ? ev.attempt || 1 : 1;
    if (key) {
      attempt = Math.max(attempt, (attempts.get(key) || 0) + 1);
      attempts.set(key, attempt);
      const earlier = lastByKey.get(key);
      if (earlier !== undefined && (bars[earlier].status === "failed" || bars[earlier].status === "open")) {
        bars[earlier].status = "retried";
        open.delete(bars[earlier].request_seq);
      }
    }
    bars.push({ lane, label: label(ev), start: at, end: null, status: "open", request_seq: ev.seq,
      reply_seq: null, attempt, row: 0, detail: "" });
    if (key) lastByKey.set(key, bars.length - 1);
    open.set(ev.seq, { index: bars.length - 1, replies: spec.replies, failures: spec.failures, key });
  }
  if (finished && finished.outcome === "cancelled") {
    for (const { index } of open.values()) bars[index].status = "cancelled";
  }
  layRows(bars);
  bars.sort((a, b) => a.start - b.start || a.request_seq - b.request_seq || (a.lane < b.lane ? -1 : a.lane > b.lane ? 1 : 0));
  const names = [...new Set(bars.map((b) => b.lane))]
    .sort((a, b) => laneRank(a) - laneRank(b) || (a < b ? -1 : a > b ? 1 : 0));
  const lanes = names.map((name) => ({
    name, rows: 1 + Math.max(...bars.filter((b) => b.lane === name).map((b) => b.row)) }));
  return { lanes, bars, gauges: gauges(events), duration: Math.max(0, events[events.length - 1].ts - t0),
    outcome: finished ? finished.outcome : null, t0 };
}

function close(ev, at, bars, open) {
  let found = ev.cause != null ? open.get(ev.cause) : undefined;
  if (found && !found.replies.includes(ev.type) && ev.type !== "actor.failed") found = undefined;
  if (!found && ev.cause == null && ev.call_id) {
    found = [...open.values()].find((o) => o.replies.includes(ev.type) && o.key.endsWith(`#${ev.call_id}`));
  }
  if (!found) return;
  const bar = bars[found.index];
  open.delete(bar.request_seq);
  const failed = ev.type === "actor.failed" || found.failures.includes(ev.type);
  Object.assign(bar, { end: Math.max(at, bar.start), status: failed ? "failed" : "ok",
    reply_seq: ev.seq, detail: failed ? errorText(ev) : "" });
  for (const call of ev.provider_calls || []) {
    bars.push({ lane: `search:${call.provider}`, label: bar.label, start: bar.start,
      end: bar.start + Math.max(0, call.elapsed_s || 0), status: call.error ? "failed" : "ok",
      request_seq: bar.request_seq, reply_seq: bar.reply_seq, attempt: bar.attempt, row: 0,
      detail: call.error || "" });
  }
}

function layRows(bars) {
  const order = bars.map((b, i) => i).sort((i, j) => bars[i].start - bars[j].start || bars[i].request_seq - bars[j].request_seq);
  const ends = new Map();
  for (const i of order) {
    const bar = bars[i];
    if (!ends.has(bar.lane)) ends.set(bar.lane, []);
    const rows = ends.get(bar.lane);
    let row = rows.findIndex((busy) => busy <= bar.start);
    if (row < 0) row = rows.length;
    rows[row] = bar.end === null ? Infinity : bar.end;
    bar.row = row;
  }
}

function gauges(events) {
  const out = [];
  let tick = null;
  for (let i = events.length - 1; i >= 0 && !tick; i -= 1) if (events[i].type === "budget.tick") tick = events[i];
  if (tick) {
    out.push({ name: "model steps", used: tick.steps || 0, limit: tick.max_steps ?? null, unit: "" });
    out.push({ name: "tool calls", used: tick.tool_calls || 0, limit: tick.max_tool_calls ?? null, unit: "" });
    if (tick.max_tokens != null) out.push({ name: "tokens", used: tick.tokens || 0, limit: tick.max_tokens, unit: "" });
    out.push({ name: "time", used: Math.round((tick.elapsed_s || 0) * 1000) / 1000, limit: tick.deadline_s ?? null, unit: "s" });
  }
  let pages = 0;
  let limit = null;
  for (const ev of events) {
    if (ev.type === "scrape.requested") pages += 1;
    else if (ev.type === "plan.requested" && ev.remaining_pages != null) limit = pages + ev.remaining_pages;
  }
  if (limit !== null || pages) out.push({ name: "pages", used: pages, limit, unit: "" });
  return out;
}

// --- drawing ----------------------------------------------------------------------------

const STATUS_TEXT = { ok: "ok", failed: "failed", retried: "failed, asked again", cancelled: "cancelled", open: "no reply yet" };

function node(tag, cls, text) {
  const n = document.createElement(tag);
  if (cls) n.className = cls;
  if (text !== undefined) n.textContent = text;
  return n;
}

/**
 * Draw `timeline` into `root` (lanes of absolutely placed bars, gauges beside).
 * `span` is the time axis length in seconds (the run so far, while it is live).
 */
export function drawSwimlanes(root, timeline, span) {
  const total = Math.max(span || timeline.duration, 1e-6);
  const pct = (t) => `${Math.min(100, Math.max(0, (t / total) * 100)).toFixed(3)}%`;
  const gaugeRow = node("div", "sl-gauges");
  for (const g of timeline.gauges) {
    const box = node("div", "sl-gauge");
    box.dataset.gauge = g.name;
    const meter = document.createElement("meter");
    meter.min = 0;
    meter.max = g.limit && g.limit > 0 ? g.limit : Math.max(1, g.used);
    meter.value = g.used;
    const unit = g.unit ? ` ${g.unit}` : "";
    box.append(node("span", "sl-gauge-name", g.name), meter,
      node("span", "sl-gauge-val", g.limit != null ? `${g.used}/${g.limit}${unit}` : `${g.used}${unit}`));
    gaugeRow.append(box);
  }
  const lanes = node("div", "sl-lanes");
  for (const lane of timeline.lanes) {
    const row = node("div", "lane");
    row.dataset.lane = lane.name;
    const track = node("div", "track");
    track.style.height = `${lane.rows * 12 + 2}px`;
    for (const bar of timeline.bars) {
      if (bar.lane !== lane.name) continue;
      const b = node("div", `bar bar-${bar.status}${bar.attempt > 1 ? " retry" : ""}`);
      const end = bar.end === null ? total : bar.end;
      b.style.left = pct(bar.start);
      b.style.width = `max(3px, ${pct(end - bar.start)})`;
      b.style.top = `${bar.row * 12 + 1}px`;
      b.dataset.status = bar.status;
      b.dataset.seq = String(bar.request_seq);
      const took = bar.end === null ? "…" : `${((bar.end - bar.start) * 1000).toFixed(0)} ms`;
      b.title = `${lane.name}: ${bar.label} (${took}, ${STATUS_TEXT[bar.status]}${bar.attempt > 1 ? `, attempt ${bar.attempt}` : ""})${bar.detail ? `\n${bar.detail}` : ""}`;
      track.append(b);
    }
    const name = node("span", "lane-name", lane.name);
    name.title = lane.name;
    row.append(name, track);
    lanes.append(row);
  }
  const axis = node("div", "sl-axis");
  axis.append(node("span", "", "0 s"), node("span", "", `${total.toFixed(2)} s`));
  if (!timeline.lanes.length) lanes.append(node("p", "muted", "No calls yet."));
  root.replaceChildren(gaugeRow, lanes, axis);
}
