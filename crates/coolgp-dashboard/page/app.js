// coolgp fleet dashboard: renders /api/fleet documents pushed as server-sent events.
// Testability hooks (fixed names): one table row per readable node with data-node-id and
// data-fleet-points, kept current. Brief mode (doc.mode === "brief", fleets above
// --full-status-limit): one grid cell per agent with data-cell-id and data-fleet-points, and
// table rows with data-agent-id for the agents that need attention first.
"use strict";
(() => {
  const $ = (id) => document.getElementById(id);
  const SVG = "http://www.w3.org/2000/svg";
  const KEYS = ["fleet_points", "rmse_holdout", "msgs_per_s"];
  const MAX_TICKS = 900;
  const MAX_ROWS = 50;
  const FLEET_KEYS = ["fleet_points_min", "fleet_points_median", "fleet_points_max",
                      "rmse_holdout_mean", "msgs_per_s"];
  let mode = "full";
  const PALETTE = ["#2453a6", "#d9480f", "#2b8a3e", "#862e9c", "#c2255c", "#0b7285",
                   "#5c940d", "#e67700", "#364fc7", "#a61e4d"];
  let hist = { t: [], series: {} };
  const charts = {};

  const clamp = (x, a, b) => Math.min(b, Math.max(a, x));
  const num = (x, d) => (x === null || x === undefined || !isFinite(x)) ? "—" : Number(x).toFixed(d);
  const int = (x) => (x === null || x === undefined) ? "—" : Math.round(x).toLocaleString("en-US");
  const byId = (a, b) => Number(a) - Number(b);
  const clock = (ms) => new Date(ms).toLocaleTimeString("en-GB", { hour12: false });

  function colour(frac) {
    const f = clamp(isFinite(frac) ? frac : 0, 0, 1);
    return `hsl(${12 + 128 * f}, ${70 - 10 * f}%, ${52 - 14 * f}%)`;
  }

  function h(tag, attrs, text) {
    const e = document.createElement(tag);
    for (const [k, v] of Object.entries(attrs || {})) e.setAttribute(k, v);
    if (text !== undefined) e.textContent = text;
    return e;
  }

  function s(tag, attrs, text) {
    const e = document.createElementNS(SVG, tag);
    for (const [k, v] of Object.entries(attrs || {})) e.setAttribute(k, v);
    if (text !== undefined) e.textContent = text;
    return e;
  }

  function ago(ms) {
    if (ms === null || ms === undefined) return "—";
    if (ms < 1000) return `${ms} ms ago`;
    if (ms < 120000) return `${(ms / 1000).toFixed(1)} s ago`;
    return `${Math.round(ms / 60000)} min ago`;
  }

  // ---- time series -------------------------------------------------------------------
  function pushHistory(doc) {
    const t = doc.updated_unix_ms / 1000;
    if (hist.t.length && t <= hist.t[hist.t.length - 1]) return;
    const fresh = {};
    for (const st of doc.nodes) {
      const m = doc.node_meta[st.id] || {};
      if (m.stale) continue;
      const r = m.rates;
      fresh[st.id] = {
        fleet_points: st.fleet_points,
        rmse_holdout: st.rmse_holdout ?? null,
        msgs_per_s: r ? r.msgs_in_per_s + r.msgs_out_per_s : null,
      };
    }
    const n = hist.t.length;
    hist.t.push(t);
    for (const id of Object.keys(fresh)) {
      if (!hist.series[id]) {
        hist.series[id] = {};
        for (const k of KEYS) hist.series[id][k] = new Array(n).fill(null);
      }
    }
    for (const [id, ser] of Object.entries(hist.series)) {
      for (const k of KEYS) ser[k].push(fresh[id] ? fresh[id][k] : null);
    }
    while (hist.t.length > MAX_TICKS) {
      hist.t.shift();
      for (const ser of Object.values(hist.series)) for (const k of KEYS) ser[k].shift();
    }
  }

  // Brief mode: a few fleet-level columns, whatever the fleet's size.
  function pushFleetHistory(doc) {
    const t = doc.updated_unix_ms / 1000;
    if (hist.t.length && t <= hist.t[hist.t.length - 1]) return;
    if (!hist.fleet) hist.fleet = {};
    for (const k of FLEET_KEYS) if (!hist.fleet[k]) hist.fleet[k] = new Array(hist.t.length).fill(null);
    const c = doc.convergence, some = c.nodes > 0;
    const v = {
      fleet_points_min: some ? c.min_fleet_points : null,
      fleet_points_median: some ? c.median_fleet_points : null,
      fleet_points_max: some ? c.max_fleet_points : null,
      rmse_holdout_mean: doc.aggregates.rmse_holdout_mean ?? null,
      msgs_per_s: doc.rates.msgs_per_s ?? null,
    };
    hist.t.push(t);
    for (const k of FLEET_KEYS) hist.fleet[k].push(v[k]);
    while (hist.t.length > MAX_TICKS) {
      hist.t.shift();
      for (const k of FLEET_KEYS) hist.fleet[k].shift();
    }
  }

  function drawChart(key, box, note) {
    const ids = Object.keys(hist.series || {}).sort(byId)
      .filter((id) => hist.series[id][key].some((v) => v !== null));
    plot(key, box, note, ids.map((id) => `node ${id}`), ids.map((id) => hist.series[id][key]),
         ids.map((id) => PALETTE[Number(id) % PALETTE.length]));
  }

  // One uPlot per box, rebuilt only when its series change.
  function plot(key, box, note, labels, columns, colours) {
    const el = $(box);
    const has = columns.map((c) => c.some((v) => v !== null));
    labels = labels.filter((_, i) => has[i]);
    colours = colours.filter((_, i) => has[i]);
    columns = columns.filter((_, i) => has[i]);
    const ids = labels;
    if (!window.uPlot || hist.t.length < 2 || ids.length === 0) {
      if (charts[key]) { charts[key].plot.destroy(); delete charts[key]; }
      el.replaceChildren(h("p", { class: "muted" }, hist.t.length < 2 ? "collecting…" : note));
      return;
    }
    const data = [hist.t, ...columns];
    const c = charts[key];
    const width = Math.max(200, el.clientWidth);
    if (c && c.ids.join() === ids.join()) {
      if (c.width !== width) { c.plot.setSize({ width, height: 200 }); c.width = width; }
      c.plot.setData(data);
      return;
    }
    if (c) c.plot.destroy();
    el.replaceChildren();
    const plot = new uPlot({
      width, height: 200,
      legend: { live: false },
      scales: { x: { time: true } },
      axes: [{}, { size: 72 }], // room for "100,000"
      series: [{}, ...ids.map((label, i) => ({ label, stroke: colours[i], width: 1.6 }))],
    }, data, el);
    charts[key] = { plot, ids, width };
  }

  function drawCharts() {
    if (mode === "brief") {
      const f = hist.fleet || {};
      const col = (k) => f[k] || [];
      plot("fleet_points", "chart-fp", "no brief yet",
           ["least", "median", "most"],
           [col("fleet_points_min"), col("fleet_points_median"), col("fleet_points_max")],
           [PALETTE[1], PALETTE[0], PALETTE[2]]);
      plot("rmse_holdout", "chart-rmse", "no agent has a --holdout set",
           ["mean over the agents"], [col("rmse_holdout_mean")], [PALETTE[3]]);
      plot("msgs_per_s", "chart-msgs", "no rates yet (two polls needed)",
           ["sent + received, all agents"], [col("msgs_per_s")], [PALETTE[5]]);
      return;
    }
    drawChart("fleet_points", "chart-fp", "no node to plot");
    drawChart("rmse_holdout", "chart-rmse", "no node has a --holdout set");
    drawChart("msgs_per_s", "chart-msgs", "no rates yet (two polls needed)");
  }

  // ---- network -----------------------------------------------------------------------
  function drawNetwork(doc, total) {
    const svg = $("net");
    const W = 420, H = 340, cx = W / 2, cy = H / 2 - 6;
    const status = {};
    for (const st of doc.nodes) status[st.id] = st;
    const bad = {};
    for (const u of doc.unreadable) bad[u.id] = u.error;
    const ids = [...new Set([...doc.members, ...doc.nodes.map((n) => n.id)])].sort(byId);
    const R = ids.length < 2 ? 0 : Math.min(W, H) / 2 - 48;
    const pos = {};
    ids.forEach((id, i) => {
      const a = -Math.PI / 2 + (2 * Math.PI * i) / ids.length;
      pos[id] = [cx + R * Math.cos(a), cy + R * Math.sin(a)];
    });
    svg.replaceChildren();
    if (ids.length === 0) {
      svg.append(s("text", { x: cx, y: cy, class: "sub" }, "no node visible"));
      return;
    }
    const stale = (id) => (doc.node_meta[id] || {}).stale;
    for (const [a, b] of doc.edges) {
      if (!pos[a] || !pos[b]) continue;
      svg.append(s("line", {
        class: "edge" + (stale(a) || stale(b) ? " stale" : ""), "data-edge": `${a}-${b}`,
        x1: pos[a][0], y1: pos[a][1], x2: pos[b][0], y2: pos[b][1],
      }));
    }
    for (const id of ids) {
      const st = status[id];
      const cls = bad[id] !== undefined ? "unreadable" : (!st || stale(id) ? "stale" : "ok");
      const g = s("g", { class: `node ${cls}`, "data-svg-node": id });
      const [x, y] = pos[id];
      const frac = st && total > 0 ? st.fleet_points / total : 0;
      g.append(s("title", {}, st
        ? `node ${id}: ${int(st.fleet_points)} of ${int(total)} points`
        : `node ${id}: ${bad[id] || "no status yet"}`));
      g.append(s("circle", { cx: x, cy: y, r: 22, fill: colour(frac) }));
      g.append(s("text", { x, y, class: "id" }, String(id)));
      const sub = st ? `${int(st.fleet_points)} / ${int(total)}` : (bad[id] ? "unreadable" : "…");
      g.append(s("text", { x, y: y + 38, class: "sub" }, sub));
      svg.append(g);
    }
  }

  // ---- table -------------------------------------------------------------------------
  function rejects(st) {
    const parts = Object.entries(st.rejected || {}).map(([k, v]) => `${k}: ${v}`);
    if (st.inbound_dropped > 0) parts.push(`dropped: ${st.inbound_dropped}`);
    return parts.length ? parts.join(", ") : "—";
  }

  function drawTable(doc, total) {
    const body = $("nodes").tBodies[0];
    const rows = [];
    for (const st of [...doc.nodes].sort((a, b) => a.id - b.id)) {
      const m = doc.node_meta[st.id] || {};
      const r = m.rates;
      const frac = total > 0 ? st.fleet_points / total : 0;
      const tr = h("tr", { "data-node-id": st.id, "data-fleet-points": st.fleet_points,
                           class: m.stale ? "stale" : "" });
      const fp = h("td", {}, int(st.fleet_points));
      const bar = h("span", { class: "bar" });
      const fill = h("i");
      fill.style.width = `${(100 * clamp(frac, 0, 1)).toFixed(1)}%`;
      fill.style.background = colour(frac);
      bar.append(fill);
      fp.append(bar);
      const nRej = Object.values(st.rejected || {}).reduce((a, b) => a + b, 0);
      const ckpt = st.durable ? ago(st.checkpoint_age_ms) : "none (no --state)";
      tr.append(
        h("td", {}, String(st.id)),
        h("td", {}, int(st.points)),
        fp,
        h("td", {}, String(st.round)),
        h("td", {}, `${st.neighbors_heard} of ${st.neighbors.length}`),
        h("td", { class: "rej" + (nRej > 0 ? " bad" : "") }, rejects(st)),
        h("td", {}, r ? `${num(r.msgs_in_per_s, 1)} · ${num(r.msgs_out_per_s, 1)}` : "—"),
        h("td", {}, r ? `${num(r.bytes_in_per_s / 1000, 1)} · ${num(r.bytes_out_per_s / 1000, 1)}` : "—"),
        h("td", {}, ckpt),
        h("td", {}, st.rmse_holdout === null || st.rmse_holdout === undefined ? "—" : num(st.rmse_holdout, 4)),
        h("td", { class: "digest", title: "digest of the q(W) this node predicts with; " +
            `σ_s ${num(st.sigma_s, 3)}, σ_n ${num(st.sigma_n, 3)}` +
            (st.site_memory ? `; site memory ${st.site_memory}` : "") },
          (st.projection_digest ? st.projection_digest.slice(0, 8) : "—") +
          (st.projection_group ? ` (${st.projection_group})` : "")),
        h("td", { class: m.stale ? "bad" : "" }, m.stale ? `stale (${ago(m.age_ms)})` : "live"),
      );
      rows.push(tr);
    }
    for (const u of doc.unreadable) {
      if (doc.nodes.some((n) => n.id === u.id)) continue;
      const tr = h("tr", { class: "unreadable", "data-unreadable-id": u.id });
      tr.append(h("td", {}, String(u.id)), h("td", { colspan: 11 }, u.error));
      rows.push(tr);
    }
    body.replaceChildren(...rows);
  }

  // ---- headline, problems, notices -------------------------------------------------------
  function drawConvergence(doc) {
    const c = doc.convergence;
    const line = $("conv-points");
    const N = int(c.total_points);
    if (c.nodes === 0) {
      line.textContent = "no node to show yet";
      line.className = "big pending";
    } else if (c.all_represent_all) {
      line.textContent = `✓ every node represents ${N} of ${N} points`;
      line.className = "big ok";
    } else {
      line.textContent = `fusing: the least-informed node represents ${int(c.min_fleet_points)} of ${N} points`;
      line.className = "big pending";
    }
    const digests = Object.entries(c.projection_digests || {});
    // Nodes holding the same q(W) within c.projection_rtol (a dashboard older than the
    // summaries sends only digests: one class per digest).
    const classes = c.projection_classes || digests.map(([, ids]) => ids);
    const modes = c.projection_modes || [];
    const shared = modes.length > 0 && modes.every((m) => m !== "per-agent");
    const within = digests.length === 1
      ? `bit-identical, digest ${digests[0][0].slice(0, 8)}`
      : `within ${c.projection_rtol || 0} relative, ${digests.length} digests`;
    let proj;
    if (digests.length === 0) proj = "";
    else if (shared && c.same_projection && c.projection_groups > 1) proj = `✓ each of ${c.projection_groups} projection groups holds one q(W) (mode ${modes.join(", ")})`;
    else if (shared && c.same_projection) proj = `✓ all nodes hold the same q(W) (${within}, mode ${modes.join(", ")})`;
    else if (shared) proj = `q(W) not yet shared: ${classes.length} different q(W) across ${c.nodes} nodes (mode ${modes.join(", ")})`;
    else proj = `q(W) per agent: ${classes.length} distinct across ${c.nodes} node(s)`;
    $("conv-proj").textContent = proj;
  }

  function drawProblems(doc) {
    const box = $("problems");
    box.replaceChildren(...doc.problems.map((p) =>
      h("div", { class: "problem" }, (p.node === null ? "" : `node ${p.node}: `) + p.message)));
  }

  function drawNotices(doc) {
    $("notices").replaceChildren(...[...doc.notices].reverse().map((n) => {
      const li = h("li", { class: n.level });
      li.append(h("time", {}, clock(n.unix_ms)), document.createTextNode(n.text));
      return li;
    }));
  }

  // ---- brief mode: grid, attention table, aggregates -------------------------------------
  // The briefs arrive as columns; rows are built here, one object per agent.
  function agentsOf(doc) {
    const a = doc.agents, out = [];
    const silent = {};
    for (const s of doc.silent) silent[s.id] = s.last_brief_ms_ago;
    const flagged = new Set(doc.problems.filter((p) => p.node !== null).map((p) => p.node));
    for (let i = 0; i < a.id.length; i++) {
      const ag = {};
      for (const k of Object.keys(a)) ag[k] = a[k][i];
      ag.silent = ag.id in silent;
      ag.flagged = flagged.has(ag.id) || ag.withheld || ag.rejected > 0 || ag.inbound_dropped > 0;
      out.push(ag);
    }
    const known = new Set(a.id);
    for (const id of doc.members) {
      if (!known.has(id)) out.push({ id, silent: true, flagged: true, fleet_points: null });
    }
    return out;
  }

  function cellTitle(ag, total) {
    if (ag.fleet_points === null) return `agent ${ag.id}: no brief yet`;
    const pct = total > 0 ? ` (${num(100 * ag.fleet_points / total, 1)} %)` : "";
    return `agent ${ag.id}: ${int(ag.fleet_points)} of ${int(total)} points${pct}, ` +
      `${int(ag.points)} own, round ${ag.round}` +
      (ag.silent ? ", did not answer the last brief request" : "") +
      (ag.withheld ? ", withheld (suspect)" : "") +
      (ag.rejected > 0 ? `, ${ag.rejected} rejected` : "") +
      (ag.inbound_dropped > 0 ? `, ${ag.inbound_dropped} dropped` : "");
  }

  function drawGrid(agents, total) {
    const grid = $("grid");
    const sorted = [...agents].sort((a, b) => a.id - b.id);
    if (grid.children.length !== sorted.length) {
      grid.replaceChildren(...sorted.map(() => h("span")));
    }
    sorted.forEach((ag, i) => {
      const c = grid.children[i];
      const cls = "cell" + (ag.silent ? " silent" : "") + (ag.withheld ? " withheld" : "") +
        (ag.flagged && !ag.silent && !ag.withheld ? " flagged" : "");
      c.className = cls;
      c.dataset.cellId = ag.id;
      c.dataset.fleetPoints = ag.fleet_points === null ? "" : ag.fleet_points;
      c.title = cellTitle(ag, total);
      c.style.background = ag.fleet_points === null ? "" :
        colour(total > 0 ? ag.fleet_points / total : 0);
    });
    $("grid-empty").toggleAttribute("hidden", sorted.length > 0);
  }

  function drawAgentsTable(agents, total) {
    // Attention first: silent or flagged agents, then the fewest fleet points, then by id.
    const rank = (ag) => (ag.silent ? 0 : ag.flagged ? 1 : 2);
    const fp = (ag) => ag.fleet_points === null ? -1 : ag.fleet_points;
    const shown = [...agents]
      .sort((a, b) => rank(a) - rank(b) || fp(a) - fp(b) || a.id - b.id)
      .slice(0, MAX_ROWS);
    const rows = shown.map((ag) => {
      const tr = h("tr", { "data-agent-id": ag.id, "data-fleet-points": ag.fleet_points ?? "",
                           class: ag.silent ? "stale" : "" });
      if (ag.fleet_points === null) {
        tr.append(h("td", {}, String(ag.id)), h("td", { colspan: 9, class: "bad" }, "no brief yet"));
        return tr;
      }
      const frac = total > 0 ? ag.fleet_points / total : 0;
      const fpc = h("td", {}, int(ag.fleet_points));
      const bar = h("span", { class: "bar" });
      const fill = h("i");
      fill.style.width = `${(100 * clamp(frac, 0, 1)).toFixed(1)}%`;
      fill.style.background = colour(frac);
      bar.append(fill);
      fpc.append(bar);
      tr.append(
        h("td", {}, String(ag.id)),
        h("td", {}, int(ag.points)),
        fpc,
        h("td", {}, String(ag.round)),
        h("td", { class: ag.withheld ? "bad" : "" }, ag.withheld ? "withheld" : "—"),
        h("td", { class: ag.rejected > 0 ? "bad" : "" }, int(ag.rejected)),
        h("td", { class: ag.inbound_dropped > 0 ? "bad" : "" }, int(ag.inbound_dropped)),
        h("td", {}, `${int(ag.messages_received)} · ${int(ag.messages_sent)}`),
        h("td", {}, ag.rmse_holdout === null || ag.rmse_holdout === undefined ? "—" : num(ag.rmse_holdout, 4)),
        h("td", { class: ag.silent ? "bad" : "" }, ag.silent ? "silent" : "answered"),
      );
      return tr;
    });
    $("agents").tBodies[0].replaceChildren(...rows);
    $("agents-shown").textContent = agents.length > shown.length
      ? `showing ${shown.length} of ${agents.length} agents: those that need attention first, then the fewest fleet points`
      : `showing ${shown.length} of ${agents.length} agents`;
  }

  function drawBriefConvergence(doc) {
    const c = doc.convergence, a = doc.aggregates;
    const line = $("conv-points");
    const N = int(c.total_points);
    if (c.nodes === 0) {
      line.textContent = "no brief yet";
      line.className = "big pending";
    } else if (c.all_represent_all) {
      line.textContent = `✓ every agent represents ${N} of ${N} points (${int(c.nodes)} agents)`;
      line.className = "big ok";
    } else {
      line.textContent = `fusing: least ${int(c.min_fleet_points)}, median ${int(c.median_fleet_points)} ` +
        `of ${N} points; ${int(c.agents_with_every_point)} of ${int(c.nodes)} agents hold every point`;
      line.className = "big pending";
    }
    const rate = doc.rates.msgs_per_s;
    $("conv-proj").textContent = `brief mode (${doc.members.length} members > --full-status-limit ` +
      `${doc.full_status_limit}): one brief request per poll · rounds ${c.round_min}–${c.round_max} · ` +
      `streams ended ${int(c.streams_ended)} of ${int(c.nodes)} · withheld ${a.withheld.length} · ` +
      `${rate === null || rate === undefined ? "—" : int(rate)} msgs/s · ` +
      "briefs carry no neighbours or q(W) digests";
  }

  function setMode(m) {
    if (m === mode) return;
    mode = m;
    hist = { t: [], series: {} };
    for (const k of Object.keys(charts)) { charts[k].plot.destroy(); delete charts[k]; }
    const brief = m === "brief";
    // The attribute, not the property: an <svg> has no `hidden` property.
    const show = (id, on) => $(id).toggleAttribute("hidden", !on);
    show("net", !brief);
    show("net-legend-stale", !brief);
    show("grid-box", brief);
    show("nodes", !brief);
    show("agents-box", brief);
    $("net-title").textContent = brief ? "Agents" : "Network";
    $("nodes-title").textContent = brief ? "Agents that need attention" : "Nodes";
    $("title-fp").textContent = brief ? "fleet_points: least · median · most" : "fleet_points per node";
    $("title-rmse").textContent = brief ? "rmse_holdout, mean over the agents" : "rmse_holdout per node";
    $("title-msgs").textContent = brief ? "messages per second, whole fleet" : "messages per second per node";
  }

  function renderBrief(doc) {
    const total = doc.convergence.total_points;
    const agents = agentsOf(doc);
    drawBriefConvergence(doc);
    drawGrid(agents, total);
    drawAgentsTable(agents, total);
    pushFleetHistory(doc);
  }

  function render(doc) {
    setMode(doc.mode === "brief" ? "brief" : "full");
    $("fleet-name").textContent = doc.fleet;
    document.title = `coolgp · ${doc.fleet}`;
    const peers = doc.connected_peers === null ? "?" : doc.connected_peers;
    $("updated").textContent = `updated ${clock(doc.updated_unix_ms)} · ${doc.members.length} member(s) · ${peers} zenoh peer(s)`;
    drawProblems(doc);
    drawNotices(doc);
    if (mode === "brief") {
      renderBrief(doc);
    } else {
      const total = doc.convergence.total_points;
      drawConvergence(doc);
      drawNetwork(doc, total);
      drawTable(doc, total);
      pushHistory(doc);
    }
    drawCharts();
  }

  function setLink(ok, text) {
    const p = $("link");
    p.textContent = text;
    p.className = "pill " + (ok ? "ok" : "warn");
  }

  function connect() {
    const es = new EventSource("/api/events");
    es.onopen = () => setLink(true, "live");
    es.onerror = () => setLink(false, "lost the dashboard server: retrying…");
    es.addEventListener("fleet", (ev) => {
      let doc;
      try { doc = JSON.parse(ev.data); } catch (e) {
        setLink(false, `unreadable update from the dashboard: ${e}`);
        return;
      }
      try { render(doc); } catch (e) {
        console.error(e);
        setLink(false, `cannot draw this update: ${e}`);
      }
    });
  }

  fetch("/api/history")
    .then((r) => r.ok ? r.json() : null)
    .then((d) => {
      if (d && Array.isArray(d.t)) {
        setMode(d.mode === "brief" ? "brief" : "full");
        hist = d;
      }
    })
    .catch(() => {})
    .finally(connect);
  window.addEventListener("resize", drawCharts);
})();
