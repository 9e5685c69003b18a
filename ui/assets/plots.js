// fusebox status page: the plots of the last 5 minutes, as inline SVG
// (no library). app.js fetches FuseboxPlots.historyPath() (GET
// /ui/api/history?scope=cluster: everything once, then only the samples
// after the newest it has) and calls FuseboxPlots.render after each refresh
// with that answer, the breaker list (for the ramps), the node order (for
// owner colours) and its DOM helpers. API strings go into SVG attributes
// and text nodes only, never markup.
'use strict';

globalThis.FuseboxPlots = (() => {
  // The helpers app.js hands over (render sets them).
  let $, el, keyOf, clock, nodeOrder, OWNER_COLOURS;

  // The samples received so far, by node and time, kept for 5 minutes of
  // the nodes' own clocks: each answer adds what is new.
  const KEEP_MS = 5 * 60 * 1000;
  const store = { node: '', interval: 2, nodes: new Map(), unreachable: [] };
  function remember(hist) {
    if (!hist) return;
    store.node = hist.node || store.node;
    store.interval = hist.interval_seconds || store.interval;
    store.unreachable = hist.unreachable || [];
    let newest = -Infinity;
    for (const n of hist.nodes || []) {
      if (!store.nodes.has(n.node)) store.nodes.set(n.node, new Map());
      const m = store.nodes.get(n.node);
      for (const s of n.samples || []) if (!isNaN(Date.parse(s.at))) m.set(s.at, s);
    }
    for (const m of store.nodes.values()) for (const at of m.keys()) newest = Math.max(newest, Date.parse(at));
    for (const [id, m] of store.nodes) {
      for (const at of [...m.keys()]) if (Date.parse(at) < newest - KEEP_MS) m.delete(at);
      if (!m.size) store.nodes.delete(id);
    }
  }
  // historyPath asks for the samples after the oldest of the nodes' newest
  // (a node whose clock is behind loses nothing; repeats are merged by time).
  function historyPath() {
    const latest = [...store.nodes.values()].map((m) => Math.max(...[...m.keys()].map(Date.parse)));
    const base = '/ui/api/history?scope=cluster';
    return latest.length ? `${base}&since=${encodeURIComponent(new Date(Math.min(...latest)).toISOString())}` : base;
  }
  function stored() {
    return {
      node: store.node, interval_seconds: store.interval, unreachable: store.unreachable,
      nodes: [...store.nodes].map(([node, m]) => ({ node, samples: [...m.values()].sort((a, b) => Date.parse(a.at) - Date.parse(b.at)) })),
    };
  }

  // The SVG namespace comes from the page's own <svg> element, so the
  // script names no URL.
  const SVG_NS = document.getElementById('plot-shards').namespaceURI;
  function svg(tag, attrs, ...children) {
    const e = document.createElementNS(SVG_NS, tag);
    for (const [k, v] of Object.entries(attrs || {})) if (v !== undefined && v !== null) e.setAttribute(k, String(v));
    for (const c of children) if (c !== undefined && c !== null) e.append(c instanceof Node ? c : document.createTextNode(String(c)));
    return e;
  }
  const PLOT = { w: 640, h: 140, l: 46, r: 12, t: 12, b: 22 };
  const fmtNum = (v) => (v >= 100 || Number.isInteger(v) ? String(Math.round(v)) : v.toFixed(1));
  // niceTop rounds a maximum up to 1, 2 or 5 × 10^n.
  function niceTop(v) {
    if (!(v > 0)) return 1;
    const p = 10 ** Math.floor(Math.log10(v));
    return [1, 2, 5, 10].map((m) => m * p).find((m) => m >= v);
  }
  // linePlot draws series ({name, cls, title, points: [[ms, value], ...]})
  // over [t0, t1] into root, y from 0; nowMs, if given, is marked.
  function linePlot(root, series, t0, t1, unit, nowMs) {
    const { w, h, l, r, t, b } = PLOT;
    const top = niceTop(Math.max(0, ...series.flatMap((s) => s.points.map((p) => p[1]))));
    const x = (ms) => l + (w - l - r) * (t1 > t0 ? (ms - t0) / (t1 - t0) : 1);
    const y = (v) => h - b - (h - t - b) * Math.min(1, v / top);
    root.setAttribute('viewBox', `0 0 ${w} ${h}`);
    const kids = [
      svg('line', { class: 'grid', x1: l, y1: y(top / 2), x2: w - r, y2: y(top / 2) }),
      svg('line', { class: 'axis', x1: l, y1: h - b, x2: w - r, y2: h - b }),
      svg('line', { class: 'axis', x1: l, y1: t, x2: l, y2: h - b }),
      svg('text', { class: 'tick', x: l - 4, y: t + 4, 'text-anchor': 'end' }, fmtNum(top)),
      svg('text', { class: 'tick', x: l - 4, y: h - b, 'text-anchor': 'end' }, '0'),
      svg('text', { class: 'tick', x: l + 4, y: t + 4 }, unit),
      svg('text', { class: 'tick', x: l, y: h - 6 }, `${clock(t0)} UTC`),
      svg('text', { class: 'tick', x: w - r, y: h - 6, 'text-anchor': 'end' }, `${clock(t1)} UTC`),
    ];
    if (nowMs !== undefined && nowMs >= t0 && nowMs <= t1) {
      kids.push(svg('line', { class: 'now', x1: x(nowMs), y1: t, x2: x(nowMs), y2: h - b }, svg('title', {}, `now, ${clock(nowMs)} UTC`)));
    }
    for (const s of series) {
      const pts = s.points.map(([ms, v]) => `${x(ms).toFixed(1)},${y(v).toFixed(1)}`).join(' ');
      kids.push(svg('polyline', { class: `series ${s.cls}`, points: pts, 'data-series': s.name, 'data-points': s.points.length,
        'data-max': fmtNum(Math.max(0, ...s.points.map((p) => p[1]))) }, svg('title', {}, s.title || s.name)));
    }
    root.replaceChildren(...kids);
  }
  function figure(kind, label, caption) {
    const root = svg('svg', { class: 'plot', role: 'img', 'aria-label': label });
    const fig = el('figure', { className: 'plot-figure', dataset: { plot: kind } }, el('figcaption', {}, caption));
    fig.append(root);
    return { fig, root };
  }

  const MAX_CALL_PLOTS = 6;
  // Calls, failures and rejections per destination and interval, summed
  // over the nodes (GET /ui/api/history?scope=cluster), as calls/s.
  function renderCallPlots(hist) {
    const every = ((hist && hist.interval_seconds) || 2) * 1000;
    const byDest = new Map();
    let t0 = Infinity, t1 = -Infinity;
    for (const n of (hist && hist.nodes) || []) {
      for (const s of n.samples || []) {
        const at = Date.parse(s.at);
        if (isNaN(at)) continue;
        const bucket = Math.floor(at / every) * every;
        t0 = Math.min(t0, bucket); t1 = Math.max(t1, bucket);
        for (const c of s.calls || []) {
          if (!byDest.has(c.destination)) byDest.set(c.destination, { total: 0, calls: 0, failures: 0, rejected: 0, at: new Map() });
          const d = byDest.get(c.destination);
          const v = d.at.get(bucket) || { calls: 0, failures: 0, rejected: 0 };
          v.calls += c.calls; v.failures += c.failures; v.rejected += c.rejected;
          d.at.set(bucket, v);
          d.calls += c.calls; d.failures += c.failures; d.rejected += c.rejected; d.total += c.calls + c.rejected;
        }
      }
    }
    const dests = [...byDest.entries()].sort((a, b) => b[1].total - a[1].total || a[0].localeCompare(b[0])).slice(0, MAX_CALL_PLOTS);
    const figs = dests.map(([dest, d]) => {
      const per = every / 1000;
      const pts = { calls: [], failures: [], rejected: [] };
      for (let b = t0; b <= t1; b += every) {
        const v = d.at.get(b) || { calls: 0, failures: 0, rejected: 0 };
        for (const k of Object.keys(pts)) pts[k].push([b + every, v[k] / per]);
      }
      const caption = `${dest}: ${d.calls} calls, ${d.failures} failures, ${d.rejected} rejected`;
      const { fig, root } = figure('calls', `calls and failures to ${dest}`, caption);
      fig.dataset.destination = dest;
      fig.dataset.calls = String(d.calls);
      fig.dataset.failures = String(d.failures);
      linePlot(root, [
        { name: 'calls', cls: 'series-calls', points: pts.calls, title: `${dest}: calls/s reaching it` },
        { name: 'failures', cls: 'series-failures', points: pts.failures, title: `${dest}: failures/s (destination down)` },
        { name: 'rejected', cls: 'series-rejected', points: pts.rejected, title: `${dest}: calls/s refused by an open breaker` },
      ], t0 + every, t1 + every, 'calls/s');
      return fig;
    });
    if (!figs.length) figs.push(el('p', { className: 'empty' }, 'No calls in the last 5 minutes.'));
    $('plot-calls').replaceChildren(...figs);
    return byDest.size;
  }

  // Shards per owner over time, from the answering node's samples (the map
  // is replicated: every node's copy is the same).
  function renderShardPlot(hist, order) {
    const self = ((hist && hist.nodes) || []).find((n) => n.node === hist.node) || { samples: [] };
    const samples = (self.samples || []).filter((s) => s.shards && !isNaN(Date.parse(s.at)));
    const owners = nodeOrder([], [...order, ...samples.flatMap((s) => Object.keys(s.shards))]).filter((id) => samples.some((s) => s.shards[id]));
    const idx = new Map(order.map((id, i) => [id, i]));
    const series = owners.map((id) => ({
      name: id, cls: `owner-line-${(idx.has(id) ? idx.get(id) : owners.indexOf(id)) % OWNER_COLOURS}`,
      title: `${id}: shards owned`, points: samples.map((s) => [Date.parse(s.at), s.shards[id] || 0]),
    }));
    const t0 = samples.length ? Date.parse(samples[0].at) : Date.now();
    const t1 = samples.length ? Date.parse(samples[samples.length - 1].at) : Date.now();
    linePlot($('plot-shards'), series, t0, t1, 'shards');
    $('plot-shards').dataset.samples = String(samples.length);
    $('plot-shards-legend').replaceChildren(...series.map((s) => {
      const last = s.points.length ? s.points[s.points.length - 1][1] : 0;
      return el('li', { dataset: { owner: s.name } }, el('span', { className: `swatch ${s.cls.replace('owner-line-', 'owner-')}` }, s.name), ` ${last} now`);
    }));
  }

  // Each ramping key's planned rate over time (GET /v1/breakers "ramp"),
  // one line per node, the current rate marked: the same 1 s stages as the
  // cell's bars, on a time axis.
  function rampRate(r, k, steps) {
    if (k === 0) return r.start_rps;
    return r.target_rps > 0 ? r.start_rps + (r.target_rps - r.start_rps) * k / steps : Infinity;
  }
  function renderRampPlots(list, order) {
    const byKey = new Map();
    for (const b of (list && list.breakers) || []) {
      if (!b.ramp) continue;
      const since = Date.parse(b.ramp.since), until = Date.parse(b.ramp.until);
      if (isNaN(since) || isNaN(until) || until <= since) continue;
      const k = keyOf(b);
      if (!byKey.has(k)) byKey.set(k, []);
      byKey.get(k).push({ node: b.node, r: b.ramp, since, until });
    }
    const idx = new Map(order.map((id, i) => [id, i]));
    const now = Date.now();
    const figs = [...byKey.keys()].sort().slice(0, MAX_CALL_PLOTS).map((k) => {
      const ramps = byKey.get(k).sort((a, b) => a.node.localeCompare(b.node));
      const t0 = Math.min(...ramps.map((x) => x.since)), t1 = Math.max(...ramps.map((x) => x.until));
      const finite = ramps.flatMap((x) => [x.r.start_rps, x.r.target_rps, x.r.rps]).filter((v) => Number.isFinite(v) && v > 0);
      const cap = Math.max(1, ...finite) * (ramps.some((x) => !(x.r.target_rps > 0)) ? 2 : 1);
      const series = ramps.map((x) => {
        const steps = Math.max(1, Math.ceil((x.until - x.since) / 1000));
        const stride = Math.max(1, Math.ceil(steps / 120));
        const pts = [];
        for (let s = 0; s < steps; s += stride) {
          const v = Math.min(cap, rampRate(x.r, s, steps));
          pts.push([x.since + s * 1000, v], [x.since + Math.min(steps, s + stride) * 1000, v]);
        }
        return { name: x.node, cls: `owner-line-${(idx.has(x.node) ? idx.get(x.node) : 0) % OWNER_COLOURS}`, points: pts,
          title: `${x.node}: ${x.r.start_rps.toFixed(1)} → ${x.r.target_rps > 0 ? x.r.target_rps.toFixed(0) : 'unlimited'} calls/s, ` +
            `${x.r.rps.toFixed(1)} now, until ${clock(x.until)} UTC` };
      });
      const { fig, root } = figure('ramp', `recovery ramp of ${k}`,
        `${k}: ${ramps.map((x) => `${x.node} ${x.r.rps.toFixed(1)} calls/s now`).join(', ')}`);
      fig.dataset.key = k;
      linePlot(root, series, t0, t1, 'calls/s', now);
      for (const x of ramps) { // the rate now, a dot on each node's line
        const { w, h, l, r, t, b } = PLOT;
        const top = niceTop(Math.max(0, ...series.flatMap((s) => s.points.map((p) => p[1]))));
        root.append(svg('circle', { class: `dot ${series.find((s) => s.name === x.node).cls}`, r: 3,
          cx: (l + (w - l - r) * (Math.min(now, t1) - t0) / (t1 - t0)).toFixed(1),
          cy: (h - b - (h - t - b) * Math.min(1, x.r.rps / top)).toFixed(1), 'data-node': x.node },
        svg('title', {}, `${x.node}: ${x.r.rps.toFixed(1)} calls/s now`)));
      }
      return fig;
    });
    if (!figs.length) figs.push(el('p', { className: 'empty' }, 'No recovery ramp under way.'));
    $('plot-ramps').replaceChildren(...figs);
  }

  function render(answer, breakers, order, helpers) {
    ({ $, el, keyOf, clock, nodeOrder, OWNER_COLOURS } = helpers);
    remember(answer);
    const hist = stored();
    const dests = renderCallPlots(hist);
    renderShardPlot(hist, order);
    const samples = Math.max(0, ...((hist && hist.nodes) || []).map((n) => (n.samples || []).length));
    const unreachable = (hist && hist.unreachable) || [];
    $('plots-summary').textContent = `${samples} sample${samples === 1 ? '' : 's'} per node, one every ${(hist && hist.interval_seconds) || 2}s, ` +
      `kept by each node; ${dests} destination${dests === 1 ? '' : 's'} called` +
      (unreachable.length ? `; no history from: ${unreachable.join(', ')}` : '') + '.';
    renderRampPlots(breakers, order);
  }

  return { render, historyPath };
})();
