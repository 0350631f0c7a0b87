// SPDX-License-Identifier: Apache-2.0
// The operator page's script (docs/ui.md): reads the extender's read-only JSON API
// (/api/v1/cluster, /api/v1/topology) and draws the nodes x GPUs grid, a GPU's holders, the pending
// GPU pods with the extender's reason, and a node's topology. Live: polls every 2 s with ?since=, so
// an unchanged cluster costs a few bytes. Built for 1,000 nodes x 8 GPUs and more: the grid is
// virtualised twice — only the rows in view exist in the DOM, and only a window of nodes around them
// is fetched (?offset=&limit=; the totals count every node) — every render builds its HTML as one
// string and writes it once, and nothing reads layout inside a loop. Marks performance entries "gs-data" (first answer parsed) and
// "gs-first-render" (first grid painted) for bench/ui-bench.py.
// Must never: change anything (GET only), load anything from elsewhere, or put a server string into
// the page without escaping it.
'use strict';
(() => {
  const POLL_MS = 2000;
  const OVERSCAN = 8;
  const FIRST_WINDOW = 80; // nodes fetched for the first paint
  const WINDOW = 200; // nodes fetched around the rows in view afterwards
  const state = {
    view: 'gpus', node: '', namespace: '', model: '', topo: '', gpu: '',
    data: null, dataFilters: null, skew: 0, polling: null, loading: false, again: false, rowHeight: 56,
    firstRender: true, want: { offset: 0, limit: FIRST_WINDOW },
  };
  const $ = (id) => document.getElementById(id);
  const ESC = { '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#39;' };
  const esc = (s) => String(s === undefined || s === null ? '' : s).replace(/[&<>"']/g, (c) => ESC[c]);
  const pct = (a, b) => (b > 0 ? Math.min(100, Math.round((100 * a) / b)) : 0);
  const w = (p) => 'w' + Math.max(0, Math.min(20, Math.round(p / 5)));
  const two = (n) => (n < 10 ? '0' : '') + n;
  // HH:MM:SS by hand: the first toLocaleTimeString loads the locale data (tens of ms on a busy machine)
  const clock = (ms) => { const d = new Date(ms); return two(d.getHours()) + ':' + two(d.getMinutes()) + ':' + two(d.getSeconds()); };
  const gib = (mib) => (mib >= 1024 ? (mib / 1024).toFixed(mib % 1024 ? 1 : 0) + ' GiB' : mib + ' MiB');

  function ago(ms) {
    if (ms === null || ms === undefined) return '–';
    let s = Math.max(0, Math.round((Date.now() + state.skew - ms) / 1000));
    if (s < 90) return s + ' s';
    const m = Math.round(s / 60);
    if (m < 90) return m + ' min';
    return (m / 60).toFixed(1) + ' h';
  }

  // ---- the URL's hash holds the view and the filters (links can be shared) ----
  const KEYS = ['view', 'node', 'namespace', 'model', 'topo', 'gpu'];
  function readHash() {
    const p = new URLSearchParams(location.hash.slice(1));
    for (const k of KEYS) state[k] = p.get(k) || (k === 'view' ? 'gpus' : '');
    if (!['gpus', 'pending', 'topology'].includes(state.view)) state.view = 'gpus';
  }
  function writeHash() {
    const p = new URLSearchParams();
    for (const k of KEYS) if (state[k] && !(k === 'view' && state[k] === 'gpus')) p.set(k, state[k]);
    history.replaceState(null, '', '#' + p.toString());
  }

  function showError(msg) {
    const e = $('error');
    e.textContent = msg || '';
    e.hidden = !msg;
  }

  // ---- data ----
  function query(since, win) {
    const p = new URLSearchParams();
    for (const k of ['node', 'namespace', 'model']) if (state[k]) p.set(k, state[k]);
    if (win) { p.set('offset', String(win.offset)); p.set('limit', String(win.limit)); }
    if (since !== undefined) p.set('since', String(since));
    return p.toString();
  }

  // One request at a time; a load asked for meanwhile runs right after. With the same filters as the
  // data in hand it asks ?since=<its generation> (an unchanged answer is a few bytes), else everything.
  async function load() {
    if (state.loading) { state.again = true; return; }
    state.loading = true;
    const status = $('status');
    try {
      const filters = query(undefined, state.want);
      const since = state.data && state.dataFilters === filters ? state.data.generation : undefined;
      const t0 = performance.now();
      const r = await fetch('/api/v1/cluster?' + query(since, state.want), { cache: 'no-store' });
      const body = await r.text();
      if (r.status === 400) {
        showError('The API refused the filters: ' + body.trim());
        return;
      }
      if (!r.ok) throw new Error('HTTP ' + r.status + ': ' + body.trim());
      const t1 = performance.now();
      const d = JSON.parse(body);
      const t2 = performance.now();
      showError('');
      status.classList.remove('down');
      if (d.unchanged) {
        status.textContent = (state.data && state.data.ready ? 'live' : 'not synced') + ' · checked ' +
          clock(Date.now());
        return;
      }
      state.data = d;
      state.dataFilters = filters;
      state.skew = d.time_ms - Date.now();
      if (state.firstRender) {
        performance.mark('gs-data');
        window.gsTiming = { fetch_ms: t1 - t0, parse_ms: t2 - t1, bytes: body.length };
      }
      const t3 = performance.now();
      render();
      if (window.gsTiming && window.gsTiming.render_ms === undefined) window.gsTiming.render_ms = performance.now() - t3;
    } catch (e) {
      status.textContent = 'disconnected: ' + e.message;
      status.classList.add('down');
    } finally {
      state.loading = false;
      if (state.again) { state.again = false; load(); }
    }
  }

  function poll() {
    clearTimeout(state.polling);
    state.polling = setTimeout(async () => {
      if (!document.hidden) await load();
      poll();
    }, POLL_MS);
  }

  // ---- header ----
  function renderHeader() {
    const d = state.data;
    const t = d.totals;
    $('status').textContent = (d.ready ? 'live' : 'not synced with the API server yet') + ' · generation ' +
      d.generation + ' · ' + clock(d.time_ms);
    $('totals').textContent = t.nodes + ' nodes · ' + t.gpus + ' GPUs (' + (t.gpus - t.gpus_healthy) +
      ' unhealthy) · memory ' + pct(t.memory_allocated_mib, t.memory_total_mib) + ' % · compute ' +
      pct(t.core_allocated_percent, 100 * t.gpus) + ' % handed out';
    const np = $('n-pending');
    np.textContent = String(d.pending_pods.length);
    np.classList.toggle('warn', d.pending_pods.some((p) => p.unschedulable_since_ms));
    for (const a of document.querySelectorAll('nav a')) a.classList.toggle('on', a.dataset.view === state.view);
    for (const v of ['gpus', 'pending', 'topology']) $('v-' + v).hidden = v !== state.view;
  }

  // ---- the grid: one row per node, one cell per GPU, only the rows in view ----
  function holderLine(g) {
    if (g.whole_holder) return esc(g.whole_holder.namespace + '/' + g.whole_holder.name);
    if (g.holders.length === 1) return esc(g.holders[0].namespace + '/' + g.holders[0].name) + ' · ' + esc(g.holders[0].what);
    if (g.holders.length) return g.holders.length + ' holders';
    return g.healthy ? 'free' : esc(g.health);
  }

  function gpuCell(n, g) {
    const key = n.name + '/' + g.index;
    const cls = 'gpu' + (g.healthy ? '' : ' bad') + (g.whole_holder ? ' whole' : '') + (state.gpu === key ? ' sel' : '');
    const mem = pct(g.memory_allocated_mib, g.memory_total_mib);
    const core = Math.min(100, g.core_allocated_percent);
    return '<button class="' + cls + '" data-gpu="' + esc(key) + '" title="' + esc('GPU ' + g.index + ' · ' + g.model +
      ' · ' + g.health + ' · compute ' + core + ' % · memory ' + mem + ' % handed out') + '">' +
      '<span class="who"><b>' + g.index + '</b> ' + holderLine(g) + '</span>' +
      '<span class="bl"><span class="bar core"><i class="' + w(core) + '"></i></span><em>' + core + '%</em></span>' +
      '<span class="bl"><span class="bar mem"><i class="' + w(mem) + '"></i></span><em>' + mem + '%</em></span></button>';
  }

  function nodeRow(n) {
    let h = '<div class="row" data-node="' + esc(n.name) + '"><div class="name"><a href="#view=topology&topo=' +
      encodeURIComponent(n.name) + '" data-topo="' + esc(n.name) + '">' + esc(n.name) + '</a><small>' +
      (n.published ? n.gpu_count + ' GPUs' + (n.driver ? ' · driver ' + esc(n.driver) : '') : 'publishes no GPUs') +
      '</small></div><div class="gpus">';
    for (const g of n.gpus) h += gpuCell(n, g);
    h += '</div>';
    if (n.unplaced_pods.length) {
      h += '<span class="unplaced" title="pods the extender counts on no GPU of this node">' +
        n.unplaced_pods.length + ' pod(s) on no known GPU: ' +
        n.unplaced_pods.map((p) => esc(p.namespace + '/' + p.name)).join(', ') + '</span>';
    }
    return h + '</div>';
  }

  function renderRows() {
    const grid = $('grid');
    const d = state.data;
    const total = d.totals.nodes;
    const rh = state.rowHeight;
    const first = Math.max(0, Math.min(Math.floor(grid.scrollTop / rh) - OVERSCAN, total - 1));
    const count = Math.ceil((grid.clientHeight || 800) / rh) + 2 * OVERSCAN;
    const last = Math.min(total, first + count);
    const have = d.offset, haveEnd = d.offset + d.nodes.length;
    let h = '';
    for (let i = first; i < last; i++) {
      h += i >= have && i < haveEnd ? nodeRow(d.nodes[i - have])
        : '<div class="row placeholder"><div class="name muted">…</div></div>';
    }
    if (!total) h = '<p class="empty">' + (d.ready ? 'No node matches.' : 'Waiting for the API server…') + '</p>';
    $('pad-top').style.height = first * rh + 'px';
    $('rows').innerHTML = h;
    $('pad-bottom').style.height = Math.max(0, total - last) * rh + 'px';
    if (total && (first < have || last > haveEnd)) { // rows in view that are not fetched: fetch around them
      const offset = Math.max(0, first - Math.floor((WINDOW - count) / 2));
      if (state.want.offset !== offset || state.want.limit !== WINDOW) {
        state.want = { offset, limit: WINDOW };
        load();
      }
    }
  }

  let scrollQueued = false;
  function onScroll() {
    if (scrollQueued || !state.data) return;
    scrollQueued = true;
    requestAnimationFrame(() => { scrollQueued = false; renderRows(); });
  }

  // ---- a GPU's detail: every holder, whatever kind ----
  function findGpu(key) {
    if (!state.data || !key) return null;
    const i = key.lastIndexOf('/');
    const n = state.data.nodes.find((x) => x.name === key.slice(0, i));
    const g = n && n.gpus.find((x) => String(x.index) === key.slice(i + 1));
    return g ? { n, g } : null;
  }

  function holderState(h) {
    if (h.assumed) return '<span class="badge assumed" title="bound by the extender just now; the watch has not confirmed it">assumed</span>';
    if (h.inferred) return '<span class="badge inferred" title="no assignment annotation: counted where the extender\'s own fit puts it">inferred</span>';
    if (!h.bound) return '<span class="badge waiting">assigned, not bound</span>';
    if (!h.confirmed) return '<span class="badge waiting">assigned, not started</span>';
    return '<span class="badge">running</span>';
  }

  function renderDetail() {
    const aside = $('detail');
    const f = findGpu(state.gpu);
    if (!f || state.view !== 'gpus') { aside.hidden = true; aside.innerHTML = ''; return; }
    const { n, g } = f;
    let h = '<h2 data-detail="' + esc(n.name + '/' + g.index) + '">' + esc(n.name) + ' · GPU ' + g.index + '</h2><dl>' +
      '<dt>model</dt><dd>' + esc(g.model) + '</dd><dt>UUID</dt><dd>' + esc(g.uuid) + '</dd>' +
      '<dt>health</dt><dd class="' + (g.healthy ? '' : 'reason') + '">' + esc(g.health) + '</dd>' +
      '<dt>memory</dt><dd>' + gib(g.memory_allocated_mib) + ' of ' + gib(g.memory_total_mib) + ' handed out</dd>' +
      '<dt>compute</dt><dd>' + g.core_allocated_percent + ' % handed out</dd></dl>' +
      '<table class="list"><thead><tr><th>holder</th><th>holds</th><th>state</th></tr></thead><tbody data-holders="' +
      esc(n.name + '/' + g.index) + '">';
    for (const x of g.holders) {
      h += '<tr data-holder="' + esc(x.namespace + '/' + x.name) + '" data-kind="' + esc(x.kind) + '"><td>' +
        esc(x.namespace + '/' + x.name) + '</td><td>' + esc(x.what) + '</td><td>' + holderState(x) +
        (x.source && x.source !== 'gpuslice' ? ' <span class="muted">[' + esc(x.source) + ']</span>' : '') + '</td></tr>';
    }
    if (!g.holders.length) h += '<tr><td colspan="3" class="empty">nobody holds this GPU</td></tr>';
    aside.innerHTML = h + '</tbody></table><p class="muted">Limits as the extender assigned them; live use per pod is ' +
      'on the Grafana dashboard (deploy/grafana).</p>';
    aside.hidden = false;
  }

  // ---- pending pods with the extender's reason ----
  function renderPending() {
    const list = state.data.pending_pods;
    let h = '';
    for (const p of list) {
      const r = p.reasons && p.reasons.length ? p.reasons[0] : null;
      let why = r ? esc(r.text) + ' <small>(' + r.nodes + ' of ' + p.nodes + ' nodes, e.g. ' + esc(r.example_node) + ')</small>'
        : (p.fit ? '<span class="muted">' + p.fit + ' node(s) fit: waiting for kube-scheduler</span>' : '');
      for (const o of (p.reasons || []).slice(1)) why += '<br><small>' + esc(o.text) + ' (' + o.nodes + ')</small>';
      if (p.other_nodes) why += '<br><small>' + p.other_nodes + ' more node(s) with other reasons</small>';
      h += '<tr data-pending="' + esc(p.namespace + '/' + p.name) + '"><td>' + esc(p.namespace + '/' + p.name) +
        '</td><td>' + esc(p.what) + '</td><td>' + (p.unschedulable_since_ms ? ago(p.unschedulable_since_ms) : '–') +
        '</td><td>' + (p.nodes === undefined ? '–' : p.nodes + ' (' + p.fit + ' / ' + p.no_room + ' / ' + p.unresolvable + ')') +
        '</td><td class="reason">' + why + '</td></tr>';
    }
    $('pending').innerHTML = h;
    $('pending-empty').hidden = list.length > 0;
  }

  // ---- a node's topology: the link matrix and the allocator's best rings ----
  function linkClass(l) {
    if (l === 'X') return 'l-self';
    if (l.startsWith('NV')) return 'l-nv';
    return 'l-' + l.toLowerCase();
  }

  async function loadTopology() {
    const box = $('topology');
    $('topo-node').value = state.topo;
    if (!state.topo) { box.innerHTML = '<p class="empty">Pick a node (its name in the GPU grid links here).</p>'; return; }
    const r = await fetch('/api/v1/topology?node=' + encodeURIComponent(state.topo), { cache: 'no-store' });
    const body = await r.text();
    if (!r.ok) { box.innerHTML = '<p class="error">' + esc(body) + '</p>'; return; }
    const t = JSON.parse(body);
    let h = '<h2>' + esc(t.node) + '</h2><table class="matrix" data-topology="' + esc(t.node) + '"><tr><th></th>';
    for (const g of t.gpus) h += '<th class="' + (g.healthy ? '' : 'down') + '">GPU' + g.index + '</th>';
    h += '</tr>';
    t.links.forEach((row, a) => {
      h += '<tr><th class="' + (t.gpus[a].healthy ? '' : 'down') + '">GPU' + a + '</th>';
      row.forEach((l, b) => { h += '<td class="' + linkClass(l) + '" title="' + t.bandwidth_gbps[a][b] + ' GB/s">' + esc(l) + '</td>'; });
      h += '</tr>';
    });
    h += '</table><table class="list rings"><thead><tr><th>GPUs</th><th>best ring of all GPUs</th><th>GB/s</th>' +
      '<th>best ring of the GPUs free whole now</th><th>GB/s</th></tr></thead><tbody>';
    for (const r0 of t.rings) {
      const f = t.free_rings.find((x) => x.count === r0.count);
      h += '<tr data-ring="' + r0.count + '"><td>' + r0.count + '</td><td>' + r0.gpus.join(', ') + '</td><td>' + r0.ring_gbps +
        '</td><td>' + (f ? f.gpus.join(', ') : '<span class="muted">not free</span>') + '</td><td>' + (f ? f.ring_gbps : '') + '</td></tr>';
    }
    box.innerHTML = h + '</tbody></table>';
  }

  // ---- everything ----
  function render() {
    if (!state.data) return;
    renderHeader();
    if (state.view === 'gpus') renderRows();
    if (state.view === 'pending') renderPending();
    renderDetail();
    if (state.firstRender) {
      state.firstRender = false;
      // after the frame that paints it
      requestAnimationFrame(() => setTimeout(() => { performance.mark('gs-first-render'); document.body.dataset.rendered = '1'; }, 0));
    }
  }

  function onHash() {
    const before = query();
    readHash();
    for (const k of ['node', 'namespace', 'model']) if ($('f-' + k).value !== state[k]) $('f-' + k).value = state[k];
    if (state.view === 'topology') loadTopology();
    if (query() !== before) { state.want = { offset: 0, limit: WINDOW }; load(); } else render();
  }

  let typing = null;
  function onFilter() {
    clearTimeout(typing);
    typing = setTimeout(() => {
      for (const k of ['node', 'namespace', 'model']) state[k] = $('f-' + k).value.trim();
      writeHash();
      $('grid').scrollTop = 0;
      state.want = { offset: 0, limit: WINDOW };
      load();
    }, 250);
  }

  function init() {
    readHash();
    for (const k of ['node', 'namespace', 'model']) {
      $('f-' + k).value = state[k];
      $('f-' + k).addEventListener('input', onFilter);
    }
    $('grid').addEventListener('scroll', onScroll, { passive: true });
    $('rows').addEventListener('click', (e) => {
      const b = e.target.closest('[data-gpu]');
      if (!b) return;
      state.gpu = state.gpu === b.dataset.gpu ? '' : b.dataset.gpu;
      writeHash();
      renderRows();
      renderDetail();
    });
    $('topo-form').addEventListener('submit', (e) => {
      e.preventDefault();
      state.topo = $('topo-node').value.trim();
      state.view = 'topology';
      writeHash();
      render();
      loadTopology();
    });
    for (const a of document.querySelectorAll('nav a')) {
      a.addEventListener('click', (e) => { // keep the filters: only the view changes
        e.preventDefault();
        state.view = a.dataset.view;
        writeHash();
        render();
        if (state.view === 'topology') loadTopology();
      });
    }
    window.addEventListener('hashchange', onHash);
    window.addEventListener('resize', onScroll);
    if (state.view === 'topology') loadTopology();
    load().then(poll);
  }

  init();
})();
