// reactive_rag live run page: start a run, follow its event stream, show it live.
//
// The stream is read with fetch() rather than EventSource so that a bearer
// token can be sent and reconnection is under our control: after any drop
// the page reconnects with `?after=<last seq>` and `Last-Event-ID`, and every
// event is applied at most once (deduplicated by seq). The run goes on on the
// server whatever happens to this page; a reload re-attaches from `#run=ID`.

import { buildTimeline, drawSwimlanes, loadReplies, repliesLoaded } from "./timeline.js";

const OUTCOMES = {
  answered: ["Answered", "every claim was verified against its source"],
  answered_from_evidence: ["Answered from evidence", "the budget ran out; answered from the evidence gathered"],
  partial: ["Partial answer", "the evidence covers only part of the question; the answer says what is missing"],
  no_evidence: ["No evidence", "nothing relevant was found"],
  degraded: ["Degraded", "evidence was found but no answer passed verification"],
  cancelled: ["Cancelled", "the run was cancelled"],
  failed: ["Failed", "the run failed"],
  interrupted: ["Interrupted", "the server stopped before the run finished"],
  handed_off: ["Handed off", "the question needs a whole document: a background summary task goes on (see the answer's link)"],
};

const $ = (id) => document.getElementById(id);

function newState(runId) {
  return {
    runId,
    lastSeq: 0,
    seqs: [],
    gaps: [],
    duplicates: 0,
    reconnects: 0,
    evidence: new Map(),
    providers: new Map(),
    deltas: [],
    events: [],  // every applied event, for the swimlanes
    lastArrival: 0,
    finished: null,
    controller: null,
    generation: 0,
  };
}

let state = newState(null);
let generation = 0;

// The conversation the page is in. The question form starts one (POST /v1/sessions) and
// the follow-up box under a finished answer goes on with it (POST /v1/sessions/{id}/runs).
// `supported` is null until the server first answers POST /v1/sessions, false if it has no
// sessions (404): then every question is a plain run and the follow-up box stays hidden.
const conversation = { sessionId: null, supported: null, turns: [], current: null };

// What the tests (and curious users in the console) can read.
window.__rr = {
  get runId() { return state.runId; },
  get seqs() { return state.seqs.slice(); },
  get gaps() { return state.gaps.slice(); },
  get duplicates() { return state.duplicates; },
  get reconnects() { return state.reconnects; },
  get finished() { return state.finished; },
  get sessionId() { return conversation.sessionId; },
  get sessionsSupported() { return conversation.supported; },
  get turns() { return conversation.turns.slice(); },
  get timeline() { return buildTimeline(state.events); },
  get events() { return state.events.slice(); },
  get collectionsOffered() { return offered; },
  drop() { if (state.controller) state.controller.abort(); },
};

// --- HTTP -------------------------------------------------------------------------

function authHeaders() {
  const token = localStorage.getItem("rr.token") || "";
  return token ? { Authorization: `Bearer ${token}` } : {};
}

async function problem(resp) {
  try {
    const body = await resp.json();
    return body.detail || body.title || body.message || body.code || `HTTP ${resp.status}`;
  } catch {
    return `HTTP ${resp.status}`;
  }
}

function chosenCollections() {
  return $("collections").value.split(",").map((c) => c.trim()).filter(Boolean);
}

function runBody(question) {
  const collections = chosenCollections();
  rememberChoices($("mode").value, collections);
  return { question, mode: $("mode").value, collections, budget: {} };
}

// Mode and collections survive a reload: the last ones asked with are kept in this
// browser, and a page that re-attaches to a run shows the ones that run was asked with.
function rememberChoices(mode, collections) {
  localStorage.setItem("rr.mode", mode);
  localStorage.setItem("rr.collections", collections.join(", "));
}

function restoreChoices(mode, collections) {
  if (mode && [...$("mode").options].some((o) => o.value === mode)) $("mode").value = mode;
  if (collections !== null && collections !== undefined) $("collections").value = collections;
  markPicked();
}

// The collections this server offers (GET /v1/collections), as buttons that add or
// remove a name in the field. An older server without that endpoint: the field alone.
let offered = null;
async function loadCollections() {
  try {
    const resp = await fetch("/v1/collections", { headers: authHeaders(), cache: "no-store" });
    if (!resp.ok) return;
    const body = await resp.json();
    const names = (body.collections || []).map((c) => (typeof c === "string" ? c : c && c.name))
      .filter((n) => typeof n === "string" && n);
    offered = names;
    const pick = $("collections-pick");
    pick.replaceChildren(...names.map((name) => el("button", {
      type: "button", dataset: { collection: name }, "aria-pressed": "false",
      onclick: () => togglePicked(name),
    }, name)));
    pick.hidden = names.length === 0;
    $("collections-help").textContent = names.length
      ? "Comma separated collection names; pick from this server's collections below."
      : "Comma separated collection names.";
    markPicked();
  } catch {
    // no list: the field still takes names by hand
  }
}

function togglePicked(name) {
  const now = chosenCollections();
  const next = now.includes(name) ? now.filter((c) => c !== name) : [...now, name];
  $("collections").value = next.join(", ");
  markPicked();
}

function markPicked() {
  const now = new Set(chosenCollections());
  for (const b of $("collections-pick").querySelectorAll("button")) {
    b.setAttribute("aria-pressed", String(now.has(b.dataset.collection)));
  }
}

function postJson(url, body) {
  return fetch(url, {
    method: "POST",
    headers: { "Content-Type": "application/json", ...authHeaders() },
    body: JSON.stringify(body),
  });
}

const sessionRuns = (id) => `/v1/sessions/${encodeURIComponent(id)}/runs`;

// The question form: a new conversation (a plain run where the server has no sessions).
async function startRun(event) {
  event.preventDefault();
  showFormError("");
  const question = $("question").value.trim();
  if (!question) { showFormError("Please type a question."); return; }
  const body = runBody(question);
  $("start").disabled = true;
  try {
    let sessionId = null;
    if (conversation.supported !== false) {
      const resp = await postJson("/v1/sessions", {});
      if (resp.status === 404 || resp.status === 405) {
        conversation.supported = false;  // an older server: runs without follow-ups
      } else if (!resp.ok) {
        showFormError(`Could not start the run: ${await problem(resp)}`);
        return;
      } else {
        conversation.supported = true;
        sessionId = (await resp.json()).session_id;
      }
    }
    const resp = await postJson(sessionId ? sessionRuns(sessionId) : "/v1/runs", body);
    if (!resp.ok) { showFormError(`Could not start the run: ${await problem(resp)}`); return; }
    const run = await resp.json();
    resetConversation(sessionId);
    begin(run, question);
  } catch (err) {
    showFormError(`Could not reach the server: ${err.message}`);
  } finally {
    $("start").disabled = false;
  }
}

// The follow-up box: the next turn of the conversation, read against the earlier ones.
async function askFollowup(event) {
  event.preventDefault();
  showFollowupError("");
  const question = $("followup-q").value.trim();
  if (!question) { showFollowupError("Please type a follow-up question."); return; }
  if (!conversation.sessionId) return;
  $("followup-ask").disabled = true;
  try {
    const resp = await postJson(sessionRuns(conversation.sessionId), runBody(question));
    if (!resp.ok) {
      const why = await problem(resp);
      showFollowupError(resp.status === 404
        ? `This conversation is no longer on the server (${why}): start a new one.`
        : `Could not ask the follow-up: ${why}`);
      return;
    }
    const run = await resp.json();
    archiveTurn();
    $("followup-q").value = "";
    begin(run, question);
  } catch (err) {
    showFollowupError(`Could not reach the server: ${err.message}`);
  } finally {
    $("followup-ask").disabled = false;
  }
}

function begin(run, question) {
  conversation.current = { question, standalone: run.standalone || question };
  const session = conversation.sessionId ? `&session=${encodeURIComponent(conversation.sessionId)}` : "";
  history.replaceState(null, "", `#run=${encodeURIComponent(run.run_id)}${session}`);
  attach(run.run_id);
  const asked = $("turn-question");
  asked.textContent = `Follow-up: ${question}`;
  asked.hidden = conversation.turns.length === 0;
  showReadAs(question, run.standalone);
}

// The finished turn moves up into the conversation's list before the next one starts.
function archiveTurn() {
  const done = state.finished;
  const current = conversation.current;
  if (!done || !current) return;
  const turn = { question: current.question, standalone: current.standalone,
    outcome: done.outcome, answer: done.answer || "", runId: state.runId };
  conversation.turns.push(turn);
  const [label] = OUTCOMES[turn.outcome] || [turn.outcome];
  const item = el("li", { class: "turn", dataset: { run: turn.runId } },
    el("p", { class: "turn-q" }, turn.question, el("span", { class: `badge outcome-${turn.outcome}` }, label)));
  if (turn.standalone !== turn.question) item.append(el("p", { class: "read-as" }, `read as: “${turn.standalone}”`));
  item.append(el("p", { class: "turn-answer" }, turn.answer || `No answer (${label}).`));
  $("turns").append(item);
  $("turns").hidden = false;
}

function resetConversation(sessionId) {
  conversation.sessionId = sessionId;
  conversation.turns = [];
  conversation.current = null;
  $("turns").replaceChildren();
  $("turns").hidden = true;
  $("followup-q").value = "";
  showFollowupError("");
}

// "New conversation": earlier turns are forgotten; the next question above starts afresh.
function newConversation() {
  resetConversation(null);
  $("followup").hidden = true;
  $("turn-question").hidden = true;
  $("read-as").hidden = true;
  if (state.runId) history.replaceState(null, "", `#run=${encodeURIComponent(state.runId)}`);
  $("question").value = "";
  $("question").focus();
}

function showReadAs(original, standalone) {
  const line = $("read-as");
  if (!standalone || standalone === original) return;
  line.textContent = `read as: “${standalone}”`;
  line.hidden = false;
}

function showFollowup() {
  const done = state.finished;
  $("followup").hidden = !(conversation.sessionId && done && done.outcome !== "interrupted");
}

function showFollowupError(message) {
  const p = $("followup-error");
  p.textContent = message;
  p.hidden = !message;
}

async function cancelRun() {
  if (!state.runId || state.finished) return;
  $("cancel").disabled = true;
  try {
    const resp = await fetch(`/v1/runs/${encodeURIComponent(state.runId)}/cancel`, {
      method: "POST", headers: authHeaders(),
    });
    if (!resp.ok && resp.status !== 409) showFormError(`Cancel failed: ${await problem(resp)}`);
  } catch (err) {
    showFormError(`Cancel failed: ${err.message}`);
    $("cancel").disabled = false;
  }
}

// --- following the stream ------------------------------------------------------------

const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

function attach(runId) {
  if (state.controller) state.controller.abort();
  generation += 1;
  state = newState(runId);
  state.generation = generation;
  resetView(runId);
  follow(state);
}

async function follow(st) {
  let attempt = 0;
  while (!st.finished && st.generation === generation) {
    const controller = new AbortController();
    st.controller = controller;
    try {
      const headers = { Accept: "text/event-stream", ...authHeaders() };
      if (st.lastSeq > 0) headers["Last-Event-ID"] = String(st.lastSeq);
      const url = `/v1/runs/${encodeURIComponent(st.runId)}/events?after=${st.lastSeq}`;
      const resp = await fetch(url, { headers, signal: controller.signal, cache: "no-store" });
      if (!resp.ok) {
        const message = await problem(resp);
        if (resp.status < 500 && resp.status !== 429) {  // retrying cannot help
          setConn("error", `stream refused: ${message}`);
          return;
        }
        throw new Error(message);
      }
      setConn("live", "live");
      attempt = 0;
      await readSse(resp.body, (ev) => {
        if (st.generation !== generation) return;
        apply(st, ev);
        // done, whether or not the server closes (an interrupted run may be resumed:
        // the server goes on with run.resumed, or ends the stream)
        if (st.finished && st.finished.outcome !== "interrupted") controller.abort();
      });
      if (!st.finished) throw new Error("stream ended before the run finished");
    } catch (err) {
      if (st.generation !== generation || st.finished) break;
      st.reconnects += 1;
      const wait = Math.min(3000, 150 * 2 ** attempt);
      attempt += 1;
      setConn("reconnecting", `reconnecting (after seq ${st.lastSeq})…`);
      await sleep(wait);
    } finally {
      st.controller = null;
    }
  }
  if (st.generation === generation && st.finished) setConn("closed", "run finished");
}

// Server-sent events parser over a byte stream (the text/event-stream format).
async function readSse(body, onEvent) {
  const reader = body.pipeThrough(new TextDecoderStream()).getReader();
  let buffer = "";
  let data = [];
  let id = null;
  try {
    for (;;) {
      const { value, done } = await reader.read();
      if (done) return;
      buffer += value;
      let nl;
      while ((nl = buffer.search(/\r\n|\r|\n/)) >= 0) {
        const line = buffer.slice(0, nl);
        buffer = buffer.slice(nl + (buffer.startsWith("\r\n", nl) ? 2 : 1));
        if (line === "") {
          if (data.length) {
            let ev = null;
            try { ev = JSON.parse(data.join("\n")); } catch { ev = null; }
            if (ev && typeof ev === "object") {
              if (typeof ev.seq !== "number" && id !== null) ev.seq = Number(id);
              onEvent(ev);
            }
          }
          data = [];
          id = null;
          continue;
        }
        if (line.startsWith(":")) continue;  // keep-alive comment
        const colon = line.indexOf(":");
        const field = colon < 0 ? line : line.slice(0, colon);
        let val = colon < 0 ? "" : line.slice(colon + 1);
        if (val.startsWith(" ")) val = val.slice(1);
        if (field === "data") data.push(val);
        else if (field === "id") id = val;
      }
    }
  } finally {
    reader.releaseLock();
  }
}

// --- applying events ------------------------------------------------------------------

function apply(st, ev) {
  const seq = ev.seq;
  if (typeof seq !== "number" || seq <= st.lastSeq) { st.duplicates += 1; return; }
  if (seq !== st.lastSeq + 1) st.gaps.push([st.lastSeq + 1, seq - 1]);
  st.lastSeq = seq;
  st.seqs.push(seq);
  st.events.push(ev);
  st.lastArrival = performance.now();
  addTimeline(ev);
  scheduleSwimlanes();
  switch (ev.type) {
    case "run.started": showQuestion(ev); break;
    case "budget.tick": showBudget(ev); break;
    case "provider.health": st.providers.set(ev.provider, ev); showProviders(st); break;
    case "evidence.registered": addEvidence(st, ev.chunks || []); break;
    case "read.completed": case "page.scraped": break;
    case "answer.delta": st.deltas.push(ev.text || ""); showDraft(st); break;
    case "verify.failed": $("answer-state").textContent = "(a draft failed verification; repairing)"; break;
    case "run.finished": finish(st, ev); showFollowup(); break;
    case "run.resumed": resumed(st); showFollowup(); break;
    case "query.rewritten": showReadAs(ev.original, ev.standalone); break;
    default: break;
  }
}

function summary(ev) {
  const n = (xs) => (Array.isArray(xs) ? xs.length : 0);
  const err = ev.error ? `${ev.error.kind}: ${ev.error.message}` : "";
  switch (ev.type) {
    case "run.started": return `“${ev.question}” (${ev.mode})`;
    case "query.rewritten": return `follow-up read as “${ev.standalone}”${Object.keys(ev.resolved || {}).length ? ` (${Object.entries(ev.resolved).map(([ref, what]) => `${ref} = ${what}`).join(", ")})` : ""}`;
    case "plan.requested": return `round ${ev.round}`;
    case "plan.decided": return `${ev.action}${n(ev.calls) ? ` ×${n(ev.calls)}` : ""}: ${ev.reason || ""}`;
    case "queries.expanded": return (ev.queries || []).join(" · ");
    case "search.requested": return `“${ev.query}”`;
    case "search.completed": return `${n(ev.hits)} hits for “${ev.query}”`;
    case "rerank.requested": return `${n(ev.candidates)} candidates`;
    case "rerank.completed": return `${n(ev.chunks)} kept${ev.below_floor ? `, ${ev.below_floor} below floor` : ""}`;
    case "read.requested": return `${ev.direction} of ${ev.chunk_id}`;
    case "read.completed": return `${n(ev.chunks)} passages after ${ev.chunk_id}`;
    case "scrape.requested": return ev.url;
    case "page.scraped": return `${n(ev.chunks)} chunks from ${ev.url}`;
    case "evidence.registered": return `${n(ev.chunks)} passages: ${(ev.chunks || []).map((c) => c.id).join(", ")}`;
    case "budget.tick": return `steps ${ev.steps}/${ev.max_steps ?? "∞"}, tools ${ev.tool_calls}/${ev.max_tool_calls ?? "∞"}, ${Number(ev.elapsed_s).toFixed(1)} s`;
    case "budget.exhausted": return `${ev.resource} (${ev.used}/${ev.limit})`;
    case "budget.extension_requested": return `one more round asked (steps ${ev.steps}/${ev.max_steps}, tools ${ev.tool_calls}/${ev.max_tool_calls}, context ${ev.context_tokens}/${ev.context_window_tokens} tokens)`;
    case "budget.extended": return `+${ev.added_steps} step, +${ev.added_tool_calls} tool calls: now ${ev.max_steps} steps, ${ev.max_tool_calls} tool calls`;
    case "budget.extension_refused": return `${ev.reason}: ${ev.detail || ""}`;
    case "point.recalled": return `${ev.point} → ${(ev.chunk_ids || []).join(", ")}`;
    case "loop.detected": return `${ev.kind}: ${ev.detail || ev.query}`;
    case "tool.rejected": return `${ev.tool}: ${ev.reason}`;
    case "answerability.judged": return `${ev.verdict} (${ev.answer_type})${n(ev.missing) ? `, missing: ${ev.missing.join(", ")}` : ""}${n(ev.searches) ? ` → searching ${ev.searches.map((q) => `“${q}”`).join(", ")}` : ""}`;
    case "conflict.detected": return `sources disagree on ${ev.attribute} of ${ev.subject}: ${(ev.sides || []).map((s, i) => `${s.value} (${s.title || s.chunk_id}, credibility ${s.credibility}${i === ev.preferred ? ", preferred" : ""})`).join(" vs ")}`;
    case "answer.requested": return `${ev.mode}, attempt ${ev.attempt}, ${n(ev.evidence_ids)} passages`;
    case "answer.delta": return ev.text;
    case "answer.verified": return `${n(ev.claims)} claims verified${ev.dropped ? `, ${ev.dropped} dropped (${(ev.errors || []).filter((e) => e.index >= 0).map((e) => e.kind).join(", ")})` : ""}${ev.judge_fallback ? `; offline check stood in for the judge: ${ev.judge_fallback.message}` : ""}`;
    case "verify.failed": return `${n(ev.errors)} claims rejected: ${(ev.errors || []).map((e) => `${e.kind}: ${e.reason}`).join("; ")}`;
    case "answer.drafted": return `${n(ev.claims)} claims${ev.fallback ? ` (offline writer: ${ev.fallback.message})` : ""}`;
    case "provider.health": return `${ev.provider} is ${ev.state}${ev.detail ? `: ${ev.detail}` : ""}`;
    case "run.fallback": return `${ev.from_mode} → ${ev.to_mode}: ${ev.reason}`;
    case "run.resumed": return `after #${ev.after_seq} (attempt ${ev.attempt}, ${Number(ev.elapsed_s).toFixed(1)} s used before)${ev.reason ? `: ${ev.reason}` : ""}`;
    case "run.cancel_requested": return ev.reason;
    case "actor.failed": return `${ev.request_type}: ${err}`;
    case "subscriber.detached": return `${ev.subscriber}: ${ev.reason}`;
    case "run.finished": return `${ev.outcome}${ev.reason ? `: ${ev.reason}` : ""}`;
    default: return err || ev.query || ev.reason || "";
  }
}

// --- rendering ------------------------------------------------------------------------

function el(tag, props = {}, ...children) {
  const node = document.createElement(tag);
  for (const [key, value] of Object.entries(props)) {
    if (key === "class") node.className = value;
    else if (key === "dataset") Object.assign(node.dataset, value);
    else if (key.startsWith("on")) node.addEventListener(key.slice(2), value);
    else node.setAttribute(key, value);
  }
  for (const child of children) node.append(child);
  return node;
}

function setConn(kind, text) {
  const badge = $("conn");
  badge.className = `badge conn-${kind}`;
  badge.textContent = text || kind;
  document.body.dataset.conn = kind;
}

function showFormError(message) {
  const p = $("form-error");
  p.textContent = message;
  p.hidden = !message;
}

function resetView(runId) {
  $("run-id").textContent = `run ${runId}`;
  $("timeline").replaceChildren();
  followTimeline = true;
  $("event-count").textContent = "0 events";
  $("evidence").replaceChildren();
  $("evidence-count").textContent = "0";
  $("evidence-more").hidden = true;
  $("providers").replaceChildren(el("li", { class: "muted" }, "none reported"));
  $("answer").replaceChildren(el("p", { class: "muted" }, "Waiting for the answer…"));
  $("answer-state").textContent = "";
  $("citations").replaceChildren();
  $("passage").hidden = true;
  drawSwimlanes($("swimlanes"), buildTimeline([]), 0);
  $("reason").hidden = true;
  $("read-as").hidden = true;
  $("followup").hidden = true;
  showFollowupError("");
  const outcome = $("outcome");
  outcome.hidden = true;
  outcome.className = "badge outcome-none";
  delete document.body.dataset.outcome;
  for (const id of ["g-steps", "g-tools", "g-time"]) { $(id).value = 0; $(`${id}-t`).textContent = "–"; }
  $("cancel").disabled = false;
  setConn("connecting", "connecting…");
}

function addTimeline(ev) {
  const list = $("timeline");
  list.append(el("li", { class: `ev ev-${ev.type.replace(/\./g, "-")}`, dataset: { seq: String(ev.seq) } },
    el("span", { class: "seq" }, `#${ev.seq}`),
    el("span", { class: "actor" }, ev.actor || "stream"),
    el("span", { class: "type" }, ev.type),
    el("span", { class: "summary" }, summary(ev))));
  $("event-count").textContent = `${list.childElementCount} events`;
  if (followTimeline) { list.scrollTop = list.scrollHeight; autoScrollTop = list.scrollTop; }
}

// The timeline follows new events until the user scrolls up to read.
let followTimeline = true;
let autoScrollTop = -1;
function watchTimelineScroll() {
  const list = $("timeline");
  list.addEventListener("scroll", () => {
    if (Math.abs(list.scrollTop - autoScrollTop) < 2) return;  // our own scrolling
    followTimeline = list.scrollTop + list.clientHeight >= list.scrollHeight - 24;
  });
}

function showQuestion(ev) {
  if (!$("question").value) $("question").value = ev.question || "";
  restoreChoices(ev.mode, Array.isArray(ev.collections) ? ev.collections.join(", ") : null);
}

function gauge(id, used, max, fmt) {
  const meter = $(id);
  meter.max = max && max > 0 ? max : Math.max(1, used);
  meter.value = used;
  $(`${id}-t`).textContent = max ? `${fmt(used)} / ${fmt(max)}` : fmt(used);
}

function showBudget(ev) {
  const int = (v) => String(v);
  const secs = (v) => `${Number(v).toFixed(1)} s`;
  gauge("g-steps", ev.steps || 0, ev.max_steps, int);
  gauge("g-tools", ev.tool_calls || 0, ev.max_tool_calls, int);
  gauge("g-time", ev.elapsed_s || 0, ev.deadline_s, secs);
}

function showProviders(st) {
  const items = [...st.providers.values()].map((p) =>
    el("li", { class: `badge health-${p.state}`, title: p.detail || "" }, `${p.provider}: ${p.state}`));
  $("providers").replaceChildren(...items);
}

function addEvidence(st, chunks) {
  const list = $("evidence");
  for (const chunk of chunks) {
    if (st.evidence.has(chunk.id)) continue;
    st.evidence.set(chunk.id, chunk);
    const text = chunk.text.length > 160 ? `${chunk.text.slice(0, 160)}…` : chunk.text;
    list.append(el("li", { dataset: { chunk: chunk.id } },
      el("strong", {}, chunk.title || chunk.doc_id || chunk.id), " ",
      el("code", {}, chunk.id),
      el("p", {}, text)));
  }
  $("evidence-count").textContent = String(st.evidence.size);
  showEvidenceMore();
}

// How many passages are below the visible part of the evidence list (0: none).
function showEvidenceMore() {
  const list = $("evidence");
  const bottom = list.scrollTop + list.clientHeight;
  const below = [...list.children].filter((li) => li.offsetTop + li.offsetHeight / 2 > bottom).length;
  const more = $("evidence-more");
  more.hidden = below === 0;
  more.textContent = `↓ ${below} more passage${below === 1 ? "" : "s"} below: scroll the list`;
}

function showDraft(st) {
  $("answer-state").textContent = "(writing…)";
  $("answer").replaceChildren(el("p", { class: "draft" }, st.deltas.join("")));
}

function finish(st, ev) {
  st.finished = ev;
  $("cancel").disabled = true;
  const [label, why] = OUTCOMES[ev.outcome] || [ev.outcome, ""];
  const outcome = $("outcome");
  outcome.hidden = false;
  outcome.className = `badge outcome-${ev.outcome}`;
  outcome.textContent = label;
  outcome.title = why;
  document.body.dataset.outcome = ev.outcome;
  const answered = ev.outcome === "answered" || ev.outcome === "answered_from_evidence";
  $("answer-state").textContent = answered ? "(verified)" : ev.outcome === "partial" ? "(verified, partial)" : "";
  const claims = ev.claims || [];
  // the reason is said once: on its own line when the run gave one, else in the answer box
  if (ev.answer) $("answer").replaceChildren(renderAnswer(ev.answer, claims));
  else if (ev.reason) $("answer").replaceChildren(el("p", { class: "muted" }, "No answer."));
  else $("answer").replaceChildren(el("p", { class: "muted" }, `No answer: ${why}.`));
  const reason = $("reason");
  reason.textContent = ev.reason ? `${label}: ${ev.reason}` : "";
  reason.hidden = !ev.reason;
  $("citations").replaceChildren(...claims.map((claim, i) => {
    const chunk = st.evidence.get(claim.source_id);
    return el("li", { id: `cite-${i + 1}` },
      citeButton(i + 1, claims),
      el("span", {}, ` ${claim.statement} `),
      el("span", { class: "muted" }, `— ${chunk ? chunk.title || chunk.doc_id : claim.source_id}`));
  }));
}

// A run interrupted by a crash goes on: it is not finished any more.
function resumed(st) {
  st.finished = null;
  st.deltas = [];
  $("cancel").disabled = false;
  const outcome = $("outcome");
  outcome.hidden = true;
  outcome.className = "badge outcome-none";
  delete document.body.dataset.outcome;
  $("reason").hidden = true;
  $("answer-state").textContent = "(resumed after an interruption)";
  setConn("live", "live");
}

function citeButton(number, claims) {
  return el("button", {
    type: "button", class: "cite", dataset: { cite: String(number) },
    "aria-label": `Show the source of citation ${number}`,
    onclick: () => openCitation(number, claims),
  }, `[${number}]`);
}

function renderAnswer(text, claims) {
  const p = el("p", { class: "verified" });
  let last = 0;
  for (const match of text.matchAll(/\[(\d+)\]/g)) {
    const number = Number(match[1]);
    if (number < 1 || number > claims.length) continue;
    p.append(text.slice(last, match.index), citeButton(number, claims));
    last = match.index + match[0].length;
  }
  p.append(text.slice(last));
  return p;
}

function openCitation(number, claims) {
  const claim = claims[number - 1];
  if (!claim) return;
  const chunk = state.evidence.get(claim.source_id);
  const box = $("passage");
  box.hidden = false;
  for (const b of document.querySelectorAll("button.cite")) b.setAttribute("aria-pressed", String(b.dataset.cite === String(number)));
  $("passage-title").textContent = `[${number}] ${chunk ? chunk.title || chunk.doc_id : claim.source_id}`;
  const meta = $("passage-meta");
  meta.replaceChildren(`passage ${claim.source_id}`);
  if (chunk && chunk.url) {
    meta.append(" · ");
    if (/^https?:/.test(chunk.url)) meta.append(el("a", { href: chunk.url, target: "_blank", rel: "noopener" }, chunk.url));
    else meta.append(chunk.url);
  }
  const quote = $("passage-text");
  if (!chunk) {
    quote.replaceChildren(el("mark", {}, claim.quote), el("p", { class: "muted" }, "(source passage not received)"));
  } else {
    const span = locate(chunk.text, claim.quote);
    if (span) {
      const [a, b] = span;
      quote.replaceChildren(chunk.text.slice(0, a), el("mark", {}, chunk.text.slice(a, b)), chunk.text.slice(b));
    } else {
      quote.replaceChildren(chunk.text, el("p", {}, "Quoted: ", el("mark", {}, claim.quote)));
    }
  }
  box.focus();
  box.scrollIntoView({ block: "nearest" });
}

function closePassage() {
  const box = $("passage");
  if (box.hidden) return;
  box.hidden = true;
  const pressed = document.querySelector("#answer button.cite[aria-pressed='true']");
  for (const b of document.querySelectorAll("button.cite")) b.setAttribute("aria-pressed", "false");
  if (pressed) pressed.focus();
}

// --- swimlanes ----------------------------------------------------------------------------

// Redrawn at most once a frame from every event the page applied; while the run is
// live the time axis runs on between events, so a call waiting for its reply grows.
let swimlanesDue = false;
function scheduleSwimlanes() {
  if (swimlanesDue) return;
  swimlanesDue = true;
  requestAnimationFrame(() => { swimlanesDue = false; drawNow(); });
}

function drawNow() {
  if ($("swimlanes-body").hidden) return;
  // the request -> reply table did not come when the page loaded: ask again, then redraw
  if (!repliesLoaded()) loadReplies().then((ok) => { if (ok) scheduleSwimlanes(); });
  const timeline = buildTimeline(state.events);
  const live = !state.finished && state.events.length > 0;
  const span = live ? timeline.duration + (performance.now() - state.lastArrival) / 1000 : timeline.duration;
  drawSwimlanes($("swimlanes"), timeline, span);
}

function toggleSwimlanes() {
  const body = $("swimlanes-body");
  body.hidden = !body.hidden;
  const button = $("swimlanes-toggle");
  button.textContent = body.hidden ? "Show" : "Hide";
  button.setAttribute("aria-expanded", String(!body.hidden));
  localStorage.setItem("rr.swimlanes", body.hidden ? "hidden" : "shown");
  if (!body.hidden) drawNow();
}

// Where `quote` occurs in `text`, ignoring case, spacing and quote/dash styles.
function locate(text, quote) {
  const exact = text.indexOf(quote);
  if (exact >= 0) return [exact, exact + quote.length];
  const fold = (c) => c.toLowerCase().replace(/[‘’`]/g, "'").replace(/[“”]/g, '"').replace(/[‐-―]/g, "-");
  const chars = [];
  const index = [];
  let space = false;
  for (let i = 0; i < text.length; i += 1) {
    if (/\s/.test(text[i])) { space = true; continue; }
    if (space && chars.length) { chars.push(" "); index.push(i); }
    space = false;
    chars.push(fold(text[i]));
    index.push(i);
  }
  const hay = chars.join("");
  let needle = fold(quote).replace(/\s+/g, " ").trim();
  for (let tries = 0; tries < 2 && needle; tries += 1) {
    const at = hay.indexOf(needle);
    if (at >= 0) return [index[at], index[at + needle.length - 1] + 1];
    needle = needle.replace(/[.,;:!?…]+$/, "").trim();
  }
  return null;
}

// --- start-up -------------------------------------------------------------------------

function init() {
  $("ask").addEventListener("submit", startRun);
  watchTimelineScroll();
  $("cancel").addEventListener("click", cancelRun);
  $("followup").addEventListener("submit", askFollowup);
  $("new-conversation").addEventListener("click", newConversation);
  $("passage-close").addEventListener("click", closePassage);
  $("evidence").addEventListener("scroll", showEvidenceMore);
  $("evidence-more").addEventListener("click", () => {
    const list = $("evidence");
    list.scrollBy({ top: list.clientHeight * 0.8 });
  });
  $("passage").addEventListener("keydown", (e) => { if (e.key === "Escape") closePassage(); });
  $("swimlanes-toggle").addEventListener("click", toggleSwimlanes);
  if (localStorage.getItem("rr.swimlanes") === "hidden") toggleSwimlanes();
  setInterval(() => { if (state.runId && !state.finished) scheduleSwimlanes(); }, 500);
  $("collections").addEventListener("input", markPicked);
  restoreChoices(localStorage.getItem("rr.mode"), localStorage.getItem("rr.collections"));
  loadCollections();
  const token = $("token");
  token.value = localStorage.getItem("rr.token") || "";
  token.addEventListener("change", () => {
    localStorage.setItem("rr.token", token.value.trim());
    loadCollections();  // a secured server lists its collections only to a tenant
  });
  const session = /session=([^&]+)/.exec(location.hash);
  if (session) { conversation.sessionId = decodeURIComponent(session[1]); conversation.supported = true; }
  const match = /run=([^&]+)/.exec(location.hash);
  if (match) attach(decodeURIComponent(match[1]));
  document.body.dataset.ready = "1";
}

init();
