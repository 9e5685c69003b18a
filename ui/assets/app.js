// fusebox status page. Plain JS, no framework, no build step: every two
// seconds it reads this node's JSON API and redraws its sections, the plots
// as inline SVG. Every string from the API goes into the DOM as text
// (textContent, title, dataset, SVG attributes), never as markup. Every
// time shown is UTC and says so.
'use strict';

(() => {
  const REFRESH_MS = 2000;
  const FETCH_TIMEOUT_MS = 5000;
  const OWNER_COLOURS = 8; // owner-0 … owner-7 in app.css
  const STATES = {
    closed: { symbol: '✓', label: 'closed' },
    'half-open': { symbol: '◐', label: 'half-open' },
    open: { symbol: '✕', label: 'OPEN' },
  };

  const $ = (id) => document.getElementById(id);

  // The API token, when the node has tokens: typed into the header's
  // prompt, or handed over once as /ui/#token=… (the fragment never
  // reaches a server and is wiped from the address bar at once). It lives
  // in sessionStorage — this tab only, gone when it closes — and is sent
  // as a bearer header, never in a URL.
  const TOKEN_KEY = 'fusebox.token';
  function readToken() {
    try { return sessionStorage.getItem(TOKEN_KEY) || ''; } catch (e) { return ''; }
  }
  function storeToken(tok) {
    try {
      if (tok) sessionStorage.setItem(TOKEN_KEY, tok); else sessionStorage.removeItem(TOKEN_KEY);
    } catch (e) { /* storage disabled: the token lasts until reload */ }
    token = tok;
  }
  let token = readToken();
  const fromFragment = /(?:^#|&)token=([^&]*)/.exec(location.hash);
  if (fromFragment) {
    storeToken(decodeURIComponent(fromFragment[1]));
    history.replaceState(null, '', location.pathname + location.search);
  }

  // showAuth shows the token prompt (why: a message) or hides it.
  function showAuth(why) {
    $('auth').hidden = !why;
    $('token-forget').hidden = !token || !!why;
    if (why) $('token-input').setAttribute('aria-description', why);
  }

  // el builds an element: props are assigned as DOM properties (className,
  // title, ...) except dataset, which is merged; children are nodes or
  // strings (as text).
  function el(tag, props, ...children) {
    const e = document.createElement(tag);
    for (const [k, v] of Object.entries(props || {})) {
      if (v === undefined || v === null) continue;
      if (k === 'dataset') Object.assign(e.dataset, v);
      else e[k] = v;
    }
    for (const c of children) {
      if (c === undefined || c === null || c === false) continue;
      e.append(c instanceof Node ? c : document.createTextNode(String(c)));
    }
    return e;
  }

  async function getJSON(path) {
    const ctl = new AbortController();
    const timer = setTimeout(() => ctl.abort(), FETCH_TIMEOUT_MS);
    try {
      const headers = { Accept: 'application/json' };
      if (token) headers.Authorization = `Bearer ${token}`;
      const resp = await fetch(path, { signal: ctl.signal, headers, cache: 'no-store' });
      const body = await resp.json().catch(() => null);
      if (!resp.ok) {
        const msg = body && body.error ? `${body.error.code}: ${body.error.message}` : `HTTP ${resp.status}`;
        const err = new Error(`${path}: ${msg}`);
        err.auth = resp.status === 401 || resp.status === 403;
        throw err;
      }
      return body;
    } catch (err) {
      if (err.name === 'AbortError') throw new Error(`${path}: no answer within ${FETCH_TIMEOUT_MS / 1000}s`);
      throw err;
    } finally {
      clearTimeout(timer);
    }
  }

  function showError(id, result) {
    const p = $(id);
    if (result.status === 'rejected') {
      p.textContent = `Could not load: ${result.reason && result.reason.message ? result.reason.message : result.reason}`;
      p.hidden = false;
      return true;
    }
    p.hidden = true;
    p.textContent = '';
    return false;
  }

  const keyOf = (b) => `${b.task_group}/${b.namespace}/${b.destination}`;
  const fmtTime = (s) => {
    const d = new Date(s);
    return isNaN(d) ? String(s) : d.toISOString().replace('T', ' ').replace('Z', ' UTC');
  };
  // clock is a time of day in UTC, without the zone (callers write it).
  const clock = (ms) => new Date(ms).toISOString().substring(11, 19);
  // fmtDur is a duration in seconds for people: 42s, 3m 05s, 2h 10m.
  const fmtDur = (sec) => {
    const s = Math.max(0, Math.round(sec));
    if (s < 90) return `${s}s`;
    if (s < 5400) return `${Math.floor(s / 60)}m ${String(s % 60).padStart(2, '0')}s`;
    return `${Math.floor(s / 3600)}h ${String(Math.floor(s / 60) % 60).padStart(2, '0')}m`;
  };
  // A member that is dead or has left: its cells are marked, not blank.
  const GONE = new Set(['dead', 'left']);
  const goneMembers = (members) => new Map((members || []).filter((m) => GONE.has(m.state)).map((m) => [m.id, m.state]));

  // Node order and owner colours: members sorted by id, then any other id
  // seen (an owner that already left), so colours are stable between
  // refreshes.
  function nodeOrder(members, extra) {
    const ids = new Set((members || []).map((m) => m.id));
    for (const id of extra) if (id) ids.add(id);
    return [...ids].sort();
  }

  function renderMembers(members) {
    const tbody = $('members').tBodies[0];
    const rows = [...(members || [])].sort((a, b) => a.id.localeCompare(b.id)).map((m) =>
      el('tr', { dataset: { member: m.id, state: m.state }, className: `member-${m.state}` },
        el('th', { scope: 'row' }, m.id),
        el('td', {}, m.state, m.suspect ? ' (suspects its egress)' : ''),
        el('td', {}, m.raft_role),
        el('td', { className: m.leader ? 'leader' : '' }, m.leader ? '★ leader' : ''),
        el('td', { className: 'mono' }, m.http_addr),
        el('td', {}, m.version || '')));
    tbody.replaceChildren(...rows);
  }

  function renderRaft(raft) {
    $('raft-summary').textContent = `Raft: leader ${raft.leader || 'none'}, term ${raft.term}, ` +
      `applied index ${raft.applied_index} as seen by ${raft.node_id} (${raft.state}).`;
  }

  function renderShards(list, order, gone) {
    const shards = (list && list.shards) || [];
    const owners = new Map(order.map((id, i) => [id, i]));
    const counts = new Map();
    for (const s of shards) counts.set(s.owner, (counts.get(s.owner) || 0) + 1);
    const draining = new Set(((list && list.draining) || []).map((d) => d.node));

    $('shards-summary').textContent = `${list ? list.num_shards : 0} shards, map version ${list ? list.version : '?'}. ` +
      'P = pinned by an operator, D = owner draining, † = owner dead or left.';
    $('shard-legend').replaceChildren(...order.filter((id) => counts.has(id)).map((id) =>
      el('li', { dataset: { owner: id } },
        el('span', { className: `swatch owner-${owners.get(id) % OWNER_COLOURS}` }, id),
        ` ${counts.get(id)} shard${counts.get(id) === 1 ? '' : 's'}${draining.has(id) ? ', draining' : ''}`)));

    $('shards').replaceChildren(...shards.map((s) => {
      const cls = ['shard', s.owner ? `owner-${owners.get(s.owner) % OWNER_COLOURS}` : 'unowned'];
      const marks = [];
      let title = `shard ${s.shard}: owner ${s.owner || 'none'}, epoch ${s.epoch}`;
      if (s.pinned) { cls.push('pinned'); marks.push('P'); title += `, pinned to ${s.pinned}`; }
      if (s.owner_draining) { cls.push('draining'); marks.push('D'); title += ', owner draining'; }
      if (gone.has(s.owner)) { cls.push('owner-gone'); marks.push('†'); title += `, owner ${gone.get(s.owner)} (gossip)`; }
      return el('li', { className: cls.join(' '), title, dataset: { shard: String(s.shard), owner: s.owner || '' } },
        el('span', { className: 'shard-no' }, `#${s.shard}`),
        el('span', { className: 'shard-owner' }, s.owner || 'unowned'),
        marks.length ? el('span', { className: 'shard-marks' }, marks.join(' ')) : null);
    }));
  }

  function breakerCell(key, node, b, unreachable, gone, openedAt) {
    if (gone) {
      return el('td', { className: 'cell state-dead', title: `${key} on ${node}: the node ${gone === 'left' ? 'has left' : 'is dead'} (gossip); its breakers are unknown`,
        dataset: { cell: '', key, node, state: 'gone', gone } }, `† ${gone}`);
    }
    if (!b) {
      const text = unreachable ? '? unreachable' : '—';
      return el('td', { className: 'cell state-none', title: `${key} on ${node}: ${unreachable ? 'node did not answer' : 'no breaker'}`,
        dataset: { cell: '', key, node, state: 'none' } }, text);
    }
    const st = STATES[b.state] || { symbol: '?', label: b.state };
    let title = `${key} on ${node}: ${st.label}; source ${b.source}; mode ${b.mode}; generation ${b.generation}`;
    const reopens = b.state === 'open' && b.open_remaining_seconds > 0 ? fmtDur(b.open_remaining_seconds) : '';
    const openSince = b.state === 'open' && openedAt ? (Date.now() - openedAt) / 1000 : null;
    if (reopens) title += `; reopens in ${reopens} (a probe call is let through then)`;
    if (openSince !== null && openSince >= 0) title += `; open for ${fmtDur(openSince)} so far`;
    if (b.mode === 'guarded') title += '; guarded: closed, but admitting only MaxRequests probe calls until one answers (a peer\'s hint said the destination fails)';
    if (b.retry_after_until) title += `; Retry-After: held open until ${fmtTime(b.retry_after_until)}`;
    if (b.counts) title += `; failures in a row ${b.counts.consecutive_failures}, requests ${b.counts.requests}`;
    const conf = confirmText(b.confirm);
    if (conf) title += `; ${conf.title}`;
    const data = { cell: '', key, node, state: b.state, source: b.source, mode: b.mode };
    if (conf) data.confirm = b.confirm.outcome;
    // The node's last active health check of the destination (issue 19 §4).
    const h = b.health;
    const healthText = h ? `health ${h.result}${h.status ? ' ' + h.status : ''} (${h.role}) ${fmtTime(h.at)}` : '';
    if (h) { title += `; ${healthText}${h.error ? ': ' + h.error : ''}`; data.health = h.result; }
    return el('td', { className: `cell state-${b.state}`, title, dataset: data },
      el('span', { className: 'cell-state' }, `${st.symbol} ${st.label}`),
      el('span', { className: 'cell-meta' }, `${b.source} · ${b.mode}`),
      reopens ? el('span', { className: 'cell-reopens', dataset: { reopensIn: String(Math.round(b.open_remaining_seconds)) } },
        `reopens in ${reopens}` + (openSince !== null && openSince >= 0 ? ` · open ${fmtDur(openSince)}` : '')) : null,
      b.retry_after_until ? el('span', { className: 'cell-retry-after', dataset: { retryAfter: b.retry_after_until } },
        `Retry-After until ${clock(Date.parse(b.retry_after_until))} UTC`) : null,
      conf ? el('span', { className: `cell-confirm confirm-${conf.cls}` }, conf.text) : null,
      h ? el('span', { className: 'cell-meta cell-health' }, healthText) : null,
      b.ramp ? rampPlot(b.ramp) : null,
      b.fleet ? fleetShare(b.fleet) : null);
  }

  // fleetShare shows a key's fleet rate budget (GET /v1/breakers "fleet",
  // issue 19 §3): this node's share and rate; the title lists every node's
  // share as this node sees it.
  function fleetShare(f) {
    const pct = (x) => `${Math.round(x * 100)}%`;
    const nodes = (f.nodes || []).map((n) => `${n.node} ${pct(n.share)} (backlog ${n.backlog}${n.silent ? ', silent' : ''})`);
    const title = `fleet budget ${f.budget_rps} calls/s; this node ${pct(f.share)} = ${f.rps.toFixed(1)} calls/s` +
      (nodes.length ? `; ${nodes.join(', ')}` : '');
    return el('span', { className: 'cell-meta cell-fleet', dataset: { fleetShare: String(f.share) }, title },
      `fleet ${pct(f.share)} · ${f.rps.toFixed(0)}/${f.budget_rps} per s`);
  }

  // rampPlot draws a recovery ramp (GET /v1/breakers "ramp") as one bar per
  // 1 s stage, its height the stage's rate against the target; stages past
  // are filled. The node's stages, as queue/ramp.go computes them.
  function rampPlot(r) {
    const since = Date.parse(r.since), until = Date.parse(r.until);
    const steps = Math.max(1, Math.min(120, Math.ceil((until - since) / 1000)));
    const target = r.target_rps > 0 ? r.target_rps : null;
    const now = Math.floor((Date.now() - since) / 1000);
    const bars = [];
    for (let k = 0; k < steps; k++) {
      const rate = k === 0 ? r.start_rps : (target === null ? Infinity : r.start_rps + (target - r.start_rps) * k / steps);
      const frac = target === null ? (k === 0 ? 0.1 : 1) : Math.max(0.02, Math.min(1, rate / target));
      const bar = el('span', { className: `ramp-bar${k < now ? ' past' : ''}${k === now ? ' now' : ''}`,
        title: `stage ${k + 1} of ${steps}: ${Number.isFinite(rate) ? rate.toFixed(1) : 'unlimited'} calls/s` });
      bar.style.height = `${Math.round(frac * 100)}%`;
      bars.push(bar);
    }
    const label = `ramp ${r.rps.toFixed(1)} → ${target === null ? 'unlimited' : target.toFixed(0)} calls/s until ${fmtTime(r.until)}`;
    return el('span', { className: 'ramp', dataset: { ramp: '', rps: String(r.rps) }, title: label },
      el('span', { className: 'ramp-plot', ariaLabel: label }, ...bars),
      el('span', { className: 'cell-meta' }, `ramp ${r.rps.toFixed(1)}/s`));
  }

  // The confirm hint policy's latest round for a cell (b.confirm): whether
  // an open came from a confirmed hint, or a peer's report was refuted.
  // Every string is a peer's and rendered as text.
  const CONFIRM = {
    pending: ['pending', '… confirming'],
    confirmed: ['confirmed', '✓ confirmed'],
    refuted: ['refuted', '✗ refuted'],
    gave_up: ['gave-up', '? unconfirmed'],
  };
  function confirmText(c) {
    if (!c || typeof c !== 'object' || typeof c.outcome !== 'string') return null;
    const [cls, label] = CONFIRM[c.outcome] || ['other', c.outcome];
    let text = label;
    if (c.by) text += ` by ${c.by}`;
    let title = `confirm: ${c.outcome}, reported by ${c.accused || '?'}`;
    if (c.designated) title += `, asked ${c.designated}`;
    if (c.by) title += `, decided by ${c.by}`;
    if (Array.isArray(c.distrusted) && c.distrusted.length) {
      title += `; distrusted for this key: ${c.distrusted.join(', ')}`;
      text += ` · distrusts ${c.distrusted.join(', ')}`;
    }
    return { cls, text, title };
  }

  function renderBreakers(list, order, gone, opened) {
    const breakers = (list && list.breakers) || [];
    const unreachable = new Set((list && list.unreachable) || []);
    const nodes = nodeOrder([], [...order, ...breakers.map((b) => b.node), ...unreachable]);
    const byKey = new Map();
    for (const b of breakers) {
      const k = keyOf(b);
      if (!byKey.has(k)) byKey.set(k, { b, nodes: new Map() });
      byKey.get(k).nodes.set(b.node, b);
    }
    const keys = [...byKey.keys()].sort();
    const open = breakers.filter((b) => b.state === 'open').length;
    $('breakers-summary').textContent = `${keys.length} breaker key${keys.length === 1 ? '' : 's'} on ${nodes.length} node${nodes.length === 1 ? '' : 's'}; ` +
      `${open} open cell${open === 1 ? '' : 's'}` + (unreachable.size ? `; did not answer: ${[...unreachable].sort().join(', ')}` : '') +
      (gone.size ? `; dead or left: ${[...gone.keys()].sort().join(', ')}` : '') + '.';

    const table = $('breakers');
    table.tHead.replaceChildren(el('tr', {},
      el('th', { scope: 'col' }, 'Task group'), el('th', { scope: 'col' }, 'Namespace'), el('th', { scope: 'col' }, 'Destination'),
      ...nodes.map((n) => el('th', { scope: 'col', dataset: { node: n }, className: gone.has(n) ? 'node-gone' : '' }, n,
        unreachable.has(n) ? ' (unreachable)' : '', gone.has(n) ? ` † ${gone.get(n)}` : ''))));
    const rows = keys.map((k) => {
      const { b, nodes: per } = byKey.get(k);
      return el('tr', { dataset: { key: k } },
        el('th', { scope: 'row' }, b.task_group), el('td', {}, b.namespace || '(any)'), el('td', {}, b.destination),
        ...nodes.map((n) => breakerCell(k, n, per.get(n), unreachable.has(n), per.has(n) ? null : gone.get(n), opened.get(`${k}|${n}`))));
    });
    if (!rows.length) rows.push(el('tr', {}, el('td', { colSpan: 3 + nodes.length, className: 'empty' }, 'No breakers yet: none of the nodes has called out.')));
    table.tBodies[0].replaceChildren(...rows);
  }

  function renderForced(forced) {
    const rows = (forced || []).map((f) => el('tr', { dataset: { key: keyOf(f) } },
      el('th', { scope: 'row', className: 'mono' }, keyOf(f)),
      el('td', {}, f.mode), el('td', {}, f.until ? fmtTime(f.until) : 'until cleared'),
      el('td', {}, f.reason || ''), el('td', {}, f.author || ''), el('td', {}, String(f.index))));
    if (!rows.length) rows.push(el('tr', {}, el('td', { colSpan: 6, className: 'empty' }, 'None.')));
    $('forced').tBodies[0].replaceChildren(...rows);
  }

  // Pending tasks an open breaker refused (GET /v1/tasks?status=blocked):
  // Temporal's BLOCKED. A page of BLOCKED_LIMIT; "more" when there are more.
  const BLOCKED_LIMIT = 100;
  function renderBlocked(list) {
    const ts = (list && list.tasks) || [];
    const more = !!(list && list.next);
    $('blocked-summary').textContent = ts.length
      ? `${ts.length}${more ? '+' : ''} pending task${ts.length === 1 && !more ? '' : 's'} waiting for an open circuit breaker` +
        (more ? ` (showing the first ${ts.length})` : '') + '; they are due at once when it closes.'
      : 'No task is blocked by an open circuit breaker.';
    $('blocked-summary').dataset.count = String(ts.length);
    const rows = ts.map((t) => el('tr', { dataset: { task: t.id } },
      el('th', { scope: 'row', className: 'mono' }, t.id),
      el('td', {}, t.namespace_id), el('td', { className: 'mono' }, t.destination),
      el('td', {}, (t.blocked && t.blocked.reason) || ''),
      el('td', {}, t.blocked && t.blocked.until ? fmtTime(t.blocked.until) : '')));
    $('blocked').tBodies[0].replaceChildren(...rows);
  }

  function renderTimeline(list) {
    const ts = (list && list.transitions) || [];
    const unreachable = (list && list.unreachable) || [];
    $('timeline-summary').textContent = `${ts.length} recent transition${ts.length === 1 ? '' : 's'}, newest first` +
      (unreachable.length ? `; no timeline from: ${unreachable.join(', ')}` : '') + '.';
    const items = ts.map((t) => {
      const to = STATES[t.to] || { symbol: '?', label: t.to };
      const from = STATES[t.from] || { symbol: '?', label: t.from };
      const key = keyOf(t);
      return el('li', { className: `event to-${t.to}`, dataset: { event: '', node: t.node, key, from: t.from, to: t.to } },
        el('time', { dateTime: t.at }, fmtTime(t.at)),
        el('span', { className: 'event-node' }, t.node),
        el('span', { className: 'event-key mono' }, key),
        el('span', { className: `event-change state-${t.to}` }, `${from.label} → ${to.symbol} ${to.label}`),
        el('span', { className: 'event-meta' }, `source ${t.source}, generation ${t.generation}` +
          (t.by_check ? ', decided by a health check (no call)' : '') +
          (t.open_for_seconds ? `, to reopen after ${fmtDur(t.open_for_seconds)}` : '')));
    });
    if (!items.length) items.push(el('li', { className: 'empty' }, 'No transitions recorded yet.'));
    $('timeline').replaceChildren(...items);
  }

  function renderHistory(changes) {
    const rows = (changes || []).map((c) => el('tr', {},
      el('td', {}, String(c.index)), el('td', {}, fmtTime(c.at)), el('td', {}, c.op), el('td', { className: 'mono' }, c.key),
      el('td', {}, [c.namespace && `namespace ${c.namespace}`, c.destination && `destination ${c.destination}`].filter(Boolean).join(', ') || 'global'),
      el('td', {}, c.author || '')));
    if (!rows.length) rows.push(el('tr', {}, el('td', { colSpan: 6, className: 'empty' }, 'No changes yet.')));
    $('history').tBodies[0].replaceChildren(...rows);
  }

  // openedAt maps "key|node" to when its breaker last opened, from the
  // merged timeline (newest first): how long an open cell has been open.
  function openedAt(list) {
    const out = new Map();
    for (const t of (list && list.transitions) || []) {
      const k = `${keyOf(t)}|${t.node}`;
      if (t.to === 'open' && !out.has(k)) {
        const at = Date.parse(t.at);
        if (!isNaN(at)) out.set(k, at);
      }
    }
    return out;
  }

  // Backlog, blocked and DLQ tasks per destination (GET /v1/tasks/_counts),
  // the busiest first.
  const COUNTS_LIMIT = 20;
  function renderDestTasks(list) {
    const ds = (list && list.destinations) || [];
    const total = (list && list.total) || 0;
    $('dest-tasks-summary').textContent = total
      ? `${total} destination${total === 1 ? '' : 's'} with pending or dead-lettered tasks` +
        (total > ds.length ? `; the busiest ${ds.length} shown` : '') +
        (list.partial ? '; blocked and DLQ counts are lower bounds (too many tasks to count them all)' : '') + '.'
      : 'No pending or dead-lettered task.';
    const rows = ds.map((d) => el('tr', { dataset: { destTasks: `${d.namespace}/${d.destination}` } },
      el('td', {}, d.namespace), el('th', { scope: 'row', className: 'mono' }, d.destination),
      el('td', { className: 'num', dataset: { col: 'backlog' } }, String(d.backlog)),
      el('td', { className: `num${d.blocked ? ' warn' : ''}`, dataset: { col: 'blocked' } }, String(d.blocked)),
      el('td', { className: `num${d.dlq ? ' bad' : ''}`, dataset: { col: 'dlq' } }, String(d.dlq))));
    $('dest-tasks').tBodies[0].replaceChildren(...rows);
  }

  async function refresh() {
    const [members, raft, shards, breakers, forced, timeline, history, blocked, counts, samples] = await Promise.allSettled([
      getJSON('/v1/cluster/members'),
      getJSON('/v1/cluster/raft'),
      getJSON('/v1/shards'),
      getJSON('/v1/breakers?scope=cluster'),
      getJSON('/v1/breakers/forced'),
      getJSON('/ui/api/transitions?scope=cluster'),
      getJSON('/v1/config/_history?limit=10'),
      getJSON(`/v1/tasks?status=blocked&limit=${BLOCKED_LIMIT}`),
      getJSON(`/v1/tasks/_counts?limit=${COUNTS_LIMIT}`),
      getJSON(FuseboxPlots.historyPath()),
    ]);
    const val = (r) => (r.status === 'fulfilled' ? r.value : null);
    let failed = 0;
    const shardOwners = (val(shards) && val(shards).shards || []).map((s) => s.owner);
    const order = nodeOrder(val(members), shardOwners);
    const gone = goneMembers(val(members));

    if (!showError('members-error', members)) renderMembers(val(members)); else failed++;
    if (raft.status === 'fulfilled') renderRaft(raft.value);
    else { $('raft-summary').textContent = `Raft: could not load: ${raft.reason && raft.reason.message}`; failed++; }
    if (!showError('shards-error', shards)) renderShards(val(shards), order, gone); else failed++;
    if (!showError('breakers-error', breakers)) renderBreakers(val(breakers), order, gone, openedAt(val(timeline))); else failed++;
    if (!showError('forced-error', forced)) renderForced(val(forced)); else failed++;
    if (!showError('timeline-error', timeline)) renderTimeline(val(timeline)); else failed++;
    if (!showError('history-error', history)) renderHistory(val(history)); else failed++;
    if (!showError('blocked-error', blocked)) renderBlocked(val(blocked)); else failed++;
    if (!showError('dest-tasks-error', counts)) renderDestTasks(val(counts)); else failed++;
    if (!showError('plots-error', samples)) FuseboxPlots.render(val(samples), val(breakers), order, { $, el, keyOf, clock, nodeOrder, OWNER_COLOURS }); else failed++;

    const status = $('status');
    const denied = [members, raft, shards, breakers, forced, timeline, history, blocked, counts, samples].find((r) => r.status === 'rejected' && r.reason && r.reason.auth);
    if (denied) {
      status.textContent = token ? 'This token may not read the cluster: enter one with the read role.' : 'This node needs an API token: enter one with the read role.';
      status.className = 'degraded';
      showAuth(denied.reason.message);
    } else {
      status.textContent = `Updated ${clock(Date.now())} UTC` + (failed ? ` — ${failed} section${failed === 1 ? '' : 's'} could not load` : '');
      status.className = failed ? 'degraded' : 'ok';
      showAuth('');
    }
    document.body.dataset.loaded = 'true';
  }

  let timer = null;
  function useToken(tok) {
    storeToken(tok);
    $('token-input').value = '';
    clearTimeout(timer);
    loop();
  }
  $('token-save').addEventListener('click', () => useToken($('token-input').value.trim()));
  $('token-input').addEventListener('keydown', (e) => { if (e.key === 'Enter') useToken($('token-input').value.trim()); });
  $('token-forget').addEventListener('click', () => useToken(''));

  async function loop() {
    try {
      await refresh();
    } catch (err) {
      const status = $('status');
      status.textContent = `Refresh failed: ${err && err.message ? err.message : err}`;
      status.className = 'degraded';
    }
    clearTimeout(timer); // a loop started by useToken while one was in flight: keep one chain
    timer = setTimeout(loop, REFRESH_MS);
  }

  loop();
})();
