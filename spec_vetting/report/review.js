// Review page logic. Every piece of catalog text (model output above all) is untrusted: it is only ever put in the
// page with textContent / createTextNode, never innerHTML, so a trace cannot create elements or run script.
(function () {
  'use strict';

  var DATA = JSON.parse(document.getElementById('review-data').textContent);
  // CANDS: the light index of every candidate of the run (list, filters, export); DETAILS: the whole records
  // (trajectory, images) of the candidates whose file this is. A run too big for one file is split (page.py).
  var CANDS = DATA.index || DATA.candidates;
  var PART = DATA.part || 0;
  var PARTS = DATA.parts || [{ file: 'index.html', n: CANDS.length }];
  var DETAILS = {};
  DATA.candidates.forEach(function (c) { DETAILS[key(c)] = c; });
  var SCHEMA = DATA.schema;
  var STORE_KEY = 'spec-vet-review:' + DATA.run_id;
  var REVIEWER_KEY = 'spec-vet-reviewer';
  var PAGE_SIZE = DATA.page_size || 1000;

  var state = { filtered: [], current: -1, page: 0 };
  var decisions = loadDecisions();
  var imageCache = {};

  function storage() {
    try { return window.localStorage; } catch (e) { return null; }  // file:// pages may have storage disabled
  }
  function loadDecisions() {
    var s = storage();
    if (!s) { return {}; }
    try { return JSON.parse(s.getItem(STORE_KEY) || '{}') || {}; } catch (e) { return {}; }
  }
  function saveDecisions() {
    var s = storage();
    if (s) { try { s.setItem(STORE_KEY, JSON.stringify(decisions)); } catch (e) { /* quota: keep in memory */ } }
  }
  function key(c) { return c.candidate_id + '\u0000' + c.task; }

  // Build an element; text goes in as a text node only.
  function el(tag, cls, text) {
    var e = document.createElement(tag);
    if (cls) { e.className = cls; }
    if (text !== undefined && text !== null) { e.textContent = String(text); }
    return e;
  }
  function fmtP(p) { return (p === null || p === undefined) ? '' : Number(p).toFixed(3); }

  function imageSrc(ref) {
    if (!ref) { return null; }
    if (!(ref in imageCache)) {
      var holder = document.getElementById('img-' + ref);
      imageCache[ref] = holder ? 'data:image/png;base64,' + holder.textContent.trim() : null;
    }
    return imageCache[ref];
  }

  function labelFromDecision(verdict, decision) {
    if ((verdict !== 'YES' && verdict !== 'NO') || (decision !== 'agree' && decision !== 'disagree')) { return ''; }
    if (decision === 'agree') { return verdict; }
    return verdict === 'YES' ? 'NO' : 'YES';
  }

  function confidenceOf(c) { return (c.p_yes === null || c.p_yes === undefined) ? null : Math.max(c.p_yes, 1 - c.p_yes); }

  function matches(c, f) {
    if (f.task && c.task !== f.task) { return false; }
    if (f.verdict && c.verdict !== f.verdict) { return false; }
    var conf = confidenceOf(c);
    if (f.conf === 'queue' && c.review_reasons.length === 0) { return false; }
    if (f.conf === 'uncertain' && (conf === null || conf >= DATA.threshold)) { return false; }
    if (f.conf === 'confident' && (conf === null || conf < DATA.threshold)) { return false; }
    if (f.conf === 'none' && conf !== null) { return false; }
    if (f.conf === 'evidence' && c.review_reasons.indexOf('evidence_disagrees') < 0) { return false; }
    var d = decisions[key(c)];
    if (f.decision === 'pending' && reviewed(d)) { return false; }
    if (f.decision === 'done' && !reviewed(d)) { return false; }
    if (f.search && c.candidate_id.toLowerCase().indexOf(f.search.toLowerCase()) < 0) { return false; }
    return true;
  }

  function currentFilters() {
    return {
      task: document.getElementById('f-task').value,
      verdict: document.getElementById('f-verdict').value,
      conf: document.getElementById('f-conf').value,
      decision: document.getElementById('f-decision').value,
      search: document.getElementById('f-search').value.trim()
    };
  }

  function applyFilters() {
    var f = currentFilters();
    state.filtered = [];
    for (var i = 0; i < CANDS.length; i++) { if (matches(CANDS[i], f)) { state.filtered.push(i); } }
    state.page = 0;
    renderList();
    document.getElementById('count').textContent = state.filtered.length + ' of ' + CANDS.length + ' shown';
  }

  function renderList() {
    var body = document.getElementById('list');
    var frag = document.createDocumentFragment();
    var start = state.page * PAGE_SIZE;
    var rows = state.filtered.slice(start, start + PAGE_SIZE);
    rows.forEach(function (idx) {
      var c = CANDS[idx];
      var tr = el('tr');
      tr.setAttribute('data-index', String(idx));
      if (idx === state.current) { tr.className = 'current'; }
      if ((c.part || 0) !== PART) { tr.title = 'trajectory in ' + PARTS[c.part].file + ' (opens it)'; }
      tr.appendChild(el('td', 'cid', c.candidate_id));
      tr.appendChild(el('td', null, c.task));
      tr.appendChild(el('td', 'verdict-' + c.verdict, c.verdict));
      tr.appendChild(el('td', null, fmtP(c.p_yes)));
      var d = decisions[key(c)];
      tr.appendChild(el('td', d && d.decision ? 'decision-' + d.decision : null, d && d.decision ? d.decision : ''));
      tr.addEventListener('click', function () { show(idx); });
      frag.appendChild(tr);
    });
    body.textContent = '';
    body.appendChild(frag);
    renderPager();
  }

  function renderPager() {
    var pager = document.getElementById('pager');
    pager.textContent = '';
    var pages = Math.max(1, Math.ceil(state.filtered.length / PAGE_SIZE));
    if (pages === 1) { return; }
    var prev = el('button', null, '< page');
    prev.disabled = state.page === 0;
    prev.addEventListener('click', function () { state.page -= 1; renderList(); });
    var next = el('button', null, 'page >');
    next.disabled = state.page >= pages - 1;
    next.addEventListener('click', function () { state.page += 1; renderList(); });
    pager.appendChild(prev);
    pager.appendChild(el('span', null, ' page ' + (state.page + 1) + ' of ' + pages + ' '));
    pager.appendChild(next);
  }

  function addImage(parent, ref, alt) {
    var src = imageSrc(ref);
    if (!src) { return null; }
    var img = el('img', 'plot');
    img.alt = alt;
    img.src = src;
    parent.appendChild(img);
    return img;
  }

  function idsList(c) {
    var dl = el('dl', 'ids');
    var fields = [['candidate_id', c.candidate_id], ['task', c.task], ['verdict', c.verdict],
      ['p_yes', fmtP(c.p_yes) + (c.p_yes_source ? ' (' + c.p_yes_source + ')' : '')],
      ['answer format', c.status + (c.fallback ? ' via ' + c.fallback : '')], ['label', c.label]];
    Object.keys(c.ids).forEach(function (k) { fields.push([k, c.ids[k]]); });
    fields.push(['engine', c.engine], ['model', c.model], ['reason', c.reason],
      ['error', c.error_kind ? c.error_kind + ': ' + (c.error_message || '') : null]);
    fields.forEach(function (f) {
      if (f[1] === null || f[1] === undefined || f[1] === '') { return; }
      dl.appendChild(el('dt', null, f[0]));
      dl.appendChild(el('dd', null, f[1]));
    });
    return dl;
  }

  // Evidence beyond the spectrum: the cross-matched numbers, and the candidate in the colour-magnitude diagram
  // among the run's other matched candidates (every page file carries their places in DATA.index).
  var SVG = 'http://www.w3.org/2000/svg';
  function svg(tag, attrs, text) {
    var e = document.createElementNS(SVG, tag);
    Object.keys(attrs).forEach(function (k) { e.setAttribute(k, String(attrs[k])); });
    if (text !== undefined) { e.textContent = text; }
    return e;
  }

  function fmtEvidence(name, v) {
    if (typeof v !== 'number' || Number.isInteger(v)) { return String(v); }
    return v.toFixed(3);
  }

  function cmdPlot(c) {
    var W = 340, H = 280, L = 44, R = 10, T = 24, B = 34;
    var x0 = -0.6, x1 = 4.0, y0 = -3.0, y1 = 17.0;  // BP-RP; M_G, bright at the top
    function px(x) { return L + (x - x0) / (x1 - x0) * (W - L - R); }
    function py(y) { return T + (y - y0) / (y1 - y0) * (H - T - B); }
    var s = svg('svg', {width: W, height: H, viewBox: '0 0 ' + W + ' ' + H, 'class': 'cmd', role: 'img'});
    s.appendChild(svg('title', {}, 'colour-magnitude diagram'));
    s.appendChild(svg('text', {x: W / 2, y: 15, 'text-anchor': 'middle', 'font-size': 12}, 'colour-magnitude diagram'));
    s.appendChild(svg('rect', {x: L, y: T, width: W - L - R, height: H - T - B, fill: 'none', stroke: '#888'}));
    [0, 1, 2, 3, 4].forEach(function (x) {
      s.appendChild(svg('text', {x: px(x), y: H - B + 13, 'text-anchor': 'middle', 'font-size': 10}, String(x)));
    });
    [0, 5, 10, 15].forEach(function (y) {
      s.appendChild(svg('text', {x: L - 4, y: py(y) + 3, 'text-anchor': 'end', 'font-size': 10}, String(y)));
    });
    s.appendChild(svg('text', {x: L + (W - L - R) / 2, y: H - 4, 'text-anchor': 'middle', 'font-size': 11}, 'BP - RP'));
    s.appendChild(svg('text', {x: 12, y: T + (H - T - B) / 2, 'text-anchor': 'middle', 'font-size': 11,
      transform: 'rotate(-90 12 ' + (T + (H - T - B) / 2) + ')'}, 'M_G'));
    Object.keys(DATA.cmd_loci).forEach(function (name) {
      var l = DATA.cmd_loci[name];  // [zero, slope, lo, hi]
      var a = l[2], b = l[3];
      s.appendChild(svg('line', {x1: px(a), y1: py(l[0] + l[1] * a), x2: px(b), y2: py(l[0] + l[1] * b),
        stroke: name === 'white dwarfs' ? '#36c' : '#c63', 'stroke-width': 2, 'stroke-dasharray': '5 3',
        'class': 'locus', 'data-locus': name}));
      s.appendChild(svg('text', {x: px(b) + 2, y: py(l[0] + l[1] * b) - 4, 'font-size': 10,
        fill: name === 'white dwarfs' ? '#36c' : '#c63', 'text-anchor': 'end'}, name));
    });
    var others = 0;
    DATA.index.forEach(function (o) {
      if (!o.cmd || (o.candidate_id === c.candidate_id && o.task === c.task)) { return; }
      others += 1;
      s.appendChild(svg('circle', {cx: px(o.cmd[0]), cy: py(o.cmd[1]), r: 2.5, fill: '#999', 'class': 'other'}));
    });
    var ev = c.evidence;
    if (typeof ev.gaia_bp_rp === 'number' && typeof ev.gaia_abs_g === 'number') {
      var err = typeof ev.gaia_abs_g_error === 'number' ? ev.gaia_abs_g_error : 0;
      s.appendChild(svg('line', {x1: px(ev.gaia_bp_rp), x2: px(ev.gaia_bp_rp), y1: py(ev.gaia_abs_g - err),
        y2: py(ev.gaia_abs_g + err), stroke: '#d00'}));
      s.appendChild(svg('circle', {cx: px(ev.gaia_bp_rp), cy: py(ev.gaia_abs_g), r: 5, fill: '#d00',
        'class': 'this-candidate'}));
    }
    s.setAttribute('data-others', String(others));
    return s;
  }

  function evidenceBox(c) {
    var ev = c.evidence || {};
    var names = Object.keys(ev);
    if (!names.length) { return null; }
    var box = el('div', 'evidence');
    box.appendChild(el('h3', null, 'evidence beyond the spectrum'));
    var dl = el('dl', 'ids');
    names.forEach(function (n) {
      dl.appendChild(el('dt', null, n));
      dl.appendChild(el('dd', null, fmtEvidence(n, ev[n])));
    });
    box.appendChild(dl);
    box.appendChild(cmdPlot(c));
    if (typeof ev.gaia_abs_g !== 'number') {
      box.appendChild(el('div', 'note', 'not in the diagram: ' + (ev.gaia_reason || 'no M_G or colour')));
    }
    // issue 38: each light-curve source's good epochs, beside the diagram
    Object.keys(c.light_curves || {}).forEach(function (name) {
      box.appendChild(lightCurvePlot(name, c.light_curves[name]));
    });
    return box;
  }

  // One light-curve source: every band's good epochs (time on x, magnitude inverted: bright at the top), with
  // their error bars.
  var BAND_COLOURS = {g: '#2a8a2a', r: '#c03030', i: '#7a4a00'};
  function lightCurvePlot(name, bands) {
    var W = 340, H = 220, L = 44, R = 10, T = 24, B = 34;
    var keys = Object.keys(bands);
    var t0 = Infinity, t1 = -Infinity, m0 = Infinity, m1 = -Infinity;
    keys.forEach(function (b) {
      var p = bands[b];
      for (var i = 0; i < p[0].length; i++) {
        t0 = Math.min(t0, p[0][i]); t1 = Math.max(t1, p[0][i]);
        m0 = Math.min(m0, p[1][i] - p[2][i]); m1 = Math.max(m1, p[1][i] + p[2][i]);
      }
    });
    if (!(t1 > t0)) { t1 = t0 + 1; }
    if (!(m1 > m0)) { m1 = m0 + 0.1; }
    var pad = (m1 - m0) * 0.05;
    m0 -= pad; m1 += pad;
    function px(t) { return L + (t - t0) / (t1 - t0) * (W - L - R); }
    function py(m) { return T + (m - m0) / (m1 - m0) * (H - T - B); }  // bright (small m) at the top
    var s = svg('svg', {width: W, height: H, viewBox: '0 0 ' + W + ' ' + H, 'class': 'light-curve', role: 'img',
      'data-source': name, 'data-bands': keys.join(',')});
    s.appendChild(svg('title', {}, name + ' light curve'));
    s.appendChild(svg('text', {x: W / 2, y: 15, 'text-anchor': 'middle', 'font-size': 12}, name + ' light curve'));
    s.appendChild(svg('rect', {x: L, y: T, width: W - L - R, height: H - T - B, fill: 'none', stroke: '#888'}));
    [[t0, 'start'], [(t0 + t1) / 2, 'middle'], [t1, 'end']].forEach(function (tick) {
      s.appendChild(svg('text', {x: px(tick[0]), y: H - B + 13, 'text-anchor': tick[1], 'font-size': 10},
        tick[0].toFixed(0)));
    });
    [m0 + pad, (m0 + m1) / 2, m1 - pad].forEach(function (m) {
      s.appendChild(svg('text', {x: L - 4, y: py(m) + 3, 'text-anchor': 'end', 'font-size': 10}, m.toFixed(1)));
    });
    s.appendChild(svg('text', {x: L + (W - L - R) / 2, y: H - 4, 'text-anchor': 'middle', 'font-size': 11},
      'time (MJD)'));
    s.appendChild(svg('text', {x: 12, y: T + (H - T - B) / 2, 'text-anchor': 'middle', 'font-size': 11,
      transform: 'rotate(-90 12 ' + (T + (H - T - B) / 2) + ')'}, 'magnitude'));
    keys.forEach(function (b, k) {
      var p = bands[b], colour = BAND_COLOURS[b] || '#333';
      var g = svg('g', {'class': 'band', 'data-band': b, 'data-points': String(p[0].length)});
      for (var i = 0; i < p[0].length; i++) {
        var x = px(p[0][i]);
        g.appendChild(svg('line', {x1: x, x2: x, y1: py(p[1][i] - p[2][i]), y2: py(p[1][i] + p[2][i]),
          stroke: colour, 'stroke-opacity': 0.5}));
        g.appendChild(svg('circle', {cx: x, cy: py(p[1][i]), r: 1.8, fill: colour}));
      }
      s.appendChild(g);
      s.appendChild(svg('text', {x: W - R - 4 - 14 * (keys.length - 1 - k), y: T + 12, 'font-size': 11,
        fill: colour, 'text-anchor': 'end'}, b));
    });
    return s;
  }

  // The decision and prospect's visual-inspection fields; every change is saved at once (localStorage).
  function update(c, fields) {
    var cur = decisions[key(c)] || {};
    Object.keys(fields).forEach(function (k) { cur[k] = fields[k]; });
    cur.reviewed_at = new Date().toISOString();
    var who = document.getElementById('reviewer').value.trim();
    if (who) { cur.reviewer = who; }
    decisions[key(c)] = cur;
    saveDecisions();
    return cur;
  }

  function reviewForm(c) {
    var box = el('div', 'review-form');
    var d = decisions[key(c)] || {};
    var row1 = el('div');
    row1.appendChild(el('strong', null, 'Your decision on this verdict: '));
    SCHEMA.decisions.forEach(function (name) {
      var b = el('button', d.decision === name ? 'decision-' + name : null,
        name + ' (' + SCHEMA.decision_keys[name] + ')');
      b.type = 'button';
      b.setAttribute('data-decision', name);
      b.addEventListener('click', function () { decide(c, name); });
      row1.appendChild(b);
    });
    row1.appendChild(el('span', d.decision ? 'decision-' + d.decision : null, d.decision ? 'marked ' + d.decision : 'not reviewed'));
    box.appendChild(row1);

    var vi = el('div', 'vi');
    var q = el('span', 'vi-quality');
    q.appendChild(el('span', 'vi-label', 'quality '));
    Object.keys(SCHEMA.vi_quality).sort().reverse().forEach(function (level) {
      var b = el('button', d.vi_quality === level ? 'on' : null, level);
      b.type = 'button'; b.title = level + ': ' + SCHEMA.vi_quality[level] + ' (key ' + level + ')';
      b.setAttribute('data-quality', level);
      b.addEventListener('click', function () { setQuality(c, d.vi_quality === level ? '' : level); });
      q.appendChild(b);
    });
    vi.appendChild(q);
    var issues = el('span', 'vi-issues');
    issues.appendChild(el('span', 'vi-label', ' issues '));
    Object.keys(SCHEMA.vi_issues).forEach(function (flag) {
      var l = el('label', null);
      l.title = SCHEMA.vi_issues[flag];
      var cb = el('input'); cb.type = 'checkbox'; cb.setAttribute('data-issue', flag);
      cb.checked = (d.vi_issues || '').indexOf(flag) >= 0;
      cb.addEventListener('change', function () {
        var now = (decisions[key(c)] || {}).vi_issues || '';
        now = cb.checked ? (now.indexOf(flag) < 0 ? now + flag : now) : now.replace(flag, '');
        var order = Object.keys(SCHEMA.vi_issues);
        update(c, { vi_issues: order.filter(function (f) { return now.indexOf(f) >= 0; }).join('') });
      });
      l.appendChild(cb); l.appendChild(document.createTextNode(flag));
      issues.appendChild(l);
    });
    vi.appendChild(issues);
    var zl = el('label', null, ' VI z ');
    var zIn = el('input', 'vi-z'); zIn.type = 'text'; zIn.size = 9; zIn.value = d.vi_z || '';
    zIn.placeholder = c.ids.redshift || '';
    zIn.addEventListener('change', function () {
      var v = zIn.value.trim();
      if (v !== '' && !isFinite(Number(v))) { zIn.value = (decisions[key(c)] || {}).vi_z || ''; return; }
      update(c, { vi_z: v });
      if (v !== '' && currentPlot) { currentPlot.setZ(Number(v)); }
    });
    zl.appendChild(zIn);
    vi.appendChild(zl);
    var tl = el('label', null, ' type ');
    var tSel = el('select', 'vi-spectype');
    [''].concat(SCHEMA.vi_spectypes).forEach(function (t) { var o = el('option', null, t || '-'); o.value = t; tSel.appendChild(o); });
    tSel.value = d.vi_spectype || '';
    tSel.addEventListener('change', function () { update(c, { vi_spectype: tSel.value }); });
    tl.appendChild(tSel);
    vi.appendChild(tl);
    box.appendChild(vi);

    var ta = el('textarea', 'vi-comment');
    ta.placeholder = 'comment (kept with the decision, saved as you type)';
    ta.value = d.comment || '';
    ta.addEventListener('input', function () { update(c, { comment: ta.value }); });
    var std = el('div', 'vi-std');
    SCHEMA.vi_comments.forEach(function (text) {
      var b = el('button', null, text); b.type = 'button';
      b.addEventListener('click', function () {
        if (ta.value.indexOf(text) >= 0) { return; }
        ta.value = ta.value ? ta.value.replace(/\s+$/, '') + '; ' + text : text;
        update(c, { comment: ta.value });
      });
      std.appendChild(b);
    });
    box.appendChild(std);
    box.appendChild(ta);
    if (d.reviewed_at) { box.appendChild(el('div', 'saved', 'saved ' + d.reviewed_at + (d.reviewer ? ' by ' + d.reviewer : ''))); }
    return box;
  }

  function setQuality(c, level) {
    update(c, { vi_quality: level });
    refreshForm(c);
  }

  function refreshForm(c) {
    var old = document.querySelector('#detail .review-form'), full = DETAILS[key(c)];
    if (old && full && CANDS[state.current] && key(CANDS[state.current]) === key(c)) {
      old.parentNode.replaceChild(reviewForm(full), old);
    }
  }

  var currentPlot = null;

  function spectrumBox(c, wrap, live) {
    var box = el('div', 'turn spectrum');
    box.appendChild(el('h3', null, 'spectrum (from ' + (c.ids.path ? c.ids.path.split('/').pop() : 'the file') + ')'));
    if (!c.spectrum) {
      box.appendChild(el('em', null, c.spectrum_error || 'no spectrum'));
      wrap.appendChild(box);
      return null;
    }
    wrap.appendChild(box);
    var d = decisions[key(c)] || {};
    var windows = [];
    c.turns.forEach(function (t) { if (t.zoom) { windows.push({ lo: t.zoom[0], hi: t.zoom[1], label: 'turn ' + t.turn, turn: t.turn }); } });
    var zvi = d.vi_z !== undefined && d.vi_z !== '' ? Number(d.vi_z) : NaN;
    var plot = window.SpecPlot.create(box, c.spectrum, {
      zRun: c.z === null ? 0 : c.z, z: isFinite(zvi) ? zvi : (c.z === null ? 0 : c.z), frame: 'rest',
      windows: windows, lines: DATA.lines, groups: DATA.line_groups,
      onUseZ: !live ? null : function (z) {
        var zIn = document.querySelector('#detail .vi-z');
        if (zIn) { zIn.value = String(z); }
        update(c, { vi_z: String(z) });
      }
    });
    plot.windows = windows;
    if (live) { currentPlot = plot; }
    return plot;
  }

  function renderDetail(c, container) {
    var live = container.id === 'detail';
    var wrap = el('div', 'candidate');
    wrap.setAttribute('data-candidate', c.candidate_id);
    wrap.appendChild(el('h2', null, c.candidate_id + ' / ' + c.task));
    if (live) { wrap.appendChild(reviewForm(c)); }
    if (c.review_reasons.length) { wrap.appendChild(el('div', 'reasons', 'in review queue: ' + c.review_reasons.join(', '))); }
    wrap.appendChild(idsList(c));
    var evidence = evidenceBox(c);
    if (evidence) { wrap.appendChild(evidence); }
    if (c.justification) { wrap.appendChild(el('pre', 'text', 'justification: ' + c.justification)); }
    container.appendChild(wrap);
    var plot = spectrumBox(c, wrap, live);
    if (c.initial_image) {
      var first = el('div', 'turn');
      first.appendChild(el('h3', null, 'full view (what the model saw first; turn -1 in the catalog)'));
      addImage(first, c.initial_image, 'full spectrum of ' + c.candidate_id);
      wrap.appendChild(first);
    }
    var k = 0;
    c.turns.forEach(function (t) {
      var box = el('div', 'turn');
      box.appendChild(el('h3', null, 'assistant turn ' + t.turn));  // from 0, as the catalog and `catalog picture`
      box.appendChild(el('pre', 'text model-text', t.assistant_text || ''));
      if (t.tool_call) { box.appendChild(el('pre', 'text', 'tool call: ' + t.tool_call)); }
      if (t.zoom) {
        var line = el('div', 'zoom-line', 'zoom window ' + t.zoom[0] + ' - ' + t.zoom[1] + ' \u00c5 (rest frame' +
          (c.ids.redshift !== undefined ? ', z = ' + c.ids.redshift : '') + ') ');
        if (plot) {
          var b = el('button', 'show-window', 'show on the spectrum');
          b.type = 'button';
          b.setAttribute('data-window', String(k));
          (function (idx) { b.addEventListener('click', function () { plot.showWindow(idx); plot.root.scrollIntoView({ block: 'nearest' }); }); })(k);
          line.appendChild(b);
        }
        box.appendChild(line);
        k += 1;
      }
      if (t.tool_response_text) { box.appendChild(el('pre', 'text', 'tool: ' + t.tool_response_text)); }
      if (t.image) { addImage(box, t.image, 'zoom ' + (t.zoom ? t.zoom.join('-') : '') + ' of ' + c.candidate_id); }
      else if (t.has_image) { box.appendChild(el('div', 'no-image', '(the picture the model saw is not embedded: "show on the spectrum" draws this window from the file)')); }
      wrap.appendChild(box);
    });
    return wrap;
  }

  // The file holding a candidate's trajectory, opened at that candidate (same folder, so it works from disk).
  function elsewhereUrl(idx) {
    var part = PARTS[CANDS[idx].part];
    return part ? part.file + '#show=' + idx : null;
  }
  function openElsewhere(idx) {
    var url = elsewhereUrl(idx);
    if (url) { window.location.href = url; }
  }

  // Scroll the list pane (only it, not the page) so the current row is visible.
  function keepInView(row) {
    var pane = document.getElementById('list-pane');
    var top = row.offsetTop, bottom = top + row.offsetHeight;
    if (top < pane.scrollTop + 30 || bottom > pane.scrollTop + pane.clientHeight) {
      pane.scrollTop = Math.max(0, top - pane.clientHeight / 2);
    }
  }

  function show(idx) {
    var full = DETAILS[key(CANDS[idx])];
    if (!full) { openElsewhere(idx); return; }
    state.current = idx;
    var detail = document.getElementById('detail');
    detail.textContent = '';
    renderDetail(full, detail);
    var rows = document.querySelectorAll('#list tr');
    for (var i = 0; i < rows.length; i++) {
      var here = rows[i].getAttribute('data-index') === String(idx);
      rows[i].className = here ? 'current' : '';
      if (here) { keepInView(rows[i]); }
    }
  }

  function step(delta) {
    if (!state.filtered.length) { return; }
    var pos = state.filtered.indexOf(state.current);
    pos = pos < 0 ? 0 : Math.min(state.filtered.length - 1, Math.max(0, pos + delta));
    var page = Math.floor(pos / PAGE_SIZE);
    if (page !== state.page) { state.page = page; renderList(); }
    show(state.filtered[pos]);
  }

  function decide(c, name) {
    update(c, { decision: name });
    renderList();
    refreshForm(c);
  }

  function csvField(v) {
    var s = (v === null || v === undefined) ? '' : String(v);
    return /[",\r\n]/.test(s) ? '"' + s.replace(/"/g, '""') + '"' : s;
  }

  function reviewed(d) {
    return d && (d.decision || d.vi_quality || d.vi_issues || d.vi_z || d.vi_spectype || d.comment);
  }

  function exportCsv() {
    var reviewer = document.getElementById('reviewer').value.trim();
    var lines = [SCHEMA.columns.join(',')];
    CANDS.forEach(function (c) {
      var d = decisions[key(c)];
      if (!reviewed(d)) { return; }
      var row = { candidate_id: c.candidate_id, task: c.task, verdict: c.verdict, decision: d.decision || '',
        label: labelFromDecision(c.verdict, d.decision), comment: d.comment || '', reviewer: d.reviewer || reviewer,
        vi_quality: d.vi_quality || '', vi_issues: d.vi_issues || '', vi_z: d.vi_z || '',
        vi_spectype: d.vi_spectype || '', run_id: DATA.run_id, reviewed_at: d.reviewed_at || '' };
      lines.push(SCHEMA.columns.map(function (col) { return csvField(row[col]); }).join(','));
    });
    return lines.join('\r\n') + '\r\n';
  }

  function download() {
    var blob = new Blob([exportCsv()], { type: 'text/csv' });
    var a = el('a');
    a.href = URL.createObjectURL(blob);
    a.download = 'review-' + DATA.run_id + '.csv';
    document.body.appendChild(a);
    a.click();
    document.body.removeChild(a);
  }

  function fillSelect(id, values) {
    var sel = document.getElementById(id);
    values.forEach(function (v) { var o = el('option', null, v); o.value = v; sel.appendChild(o); });
    sel.addEventListener('change', applyFilters);
  }

  function onKey(ev) {
    var tag = ev.target && ev.target.tagName;
    if (tag === 'INPUT' || tag === 'TEXTAREA' || tag === 'SELECT' || ev.ctrlKey || ev.metaKey || ev.altKey) { return; }
    var c = CANDS[state.current];
    if (ev.key === 'j' || ev.key === 'ArrowDown') { step(1); ev.preventDefault(); return; }
    if (ev.key === 'k' || ev.key === 'ArrowUp') { step(-1); ev.preventDefault(); return; }
    if (!c) { return; }
    var full = DETAILS[key(c)];
    SCHEMA.decisions.forEach(function (name) { if (ev.key === SCHEMA.decision_keys[name]) { decide(c, name); } });
    if (full && Object.prototype.hasOwnProperty.call(SCHEMA.vi_quality, ev.key)) { setQuality(full, ev.key); }
  }

  function init() {
    var tasks = [], verdicts = [];
    CANDS.forEach(function (c) {
      if (tasks.indexOf(c.task) < 0) { tasks.push(c.task); }
      if (verdicts.indexOf(c.verdict) < 0) { verdicts.push(c.verdict); }
    });
    fillSelect('f-task', tasks.sort());
    fillSelect('f-verdict', verdicts.sort());
    ['f-conf', 'f-decision'].forEach(function (id) { document.getElementById(id).addEventListener('change', applyFilters); });
    document.getElementById('f-search').addEventListener('input', applyFilters);
    var reviewer = document.getElementById('reviewer');
    var s = storage();
    reviewer.value = (s && s.getItem(REVIEWER_KEY)) || '';
    reviewer.addEventListener('change', function () { if (s) { s.setItem(REVIEWER_KEY, reviewer.value); } });
    document.getElementById('export').addEventListener('click', download);
    document.addEventListener('keydown', onKey);
    applyFilters();
    var asked = /^#show=(\d+)$/.exec(window.location.hash);
    var start = asked ? Number(asked[1]) : -1;
    if (!(start >= 0 && start < CANDS.length && DETAILS[key(CANDS[start])])) {
      start = -1;  // else the first listed candidate of this file: opening a file never jumps to another one
      for (var i = 0; i < state.filtered.length && start < 0; i++) {
        if (DETAILS[key(CANDS[state.filtered[i]])]) { start = state.filtered[i]; }
      }
    }
    if (start >= 0) {
      var pos = state.filtered.indexOf(start);
      if (pos >= PAGE_SIZE) { state.page = Math.floor(pos / PAGE_SIZE); renderList(); }
      show(start);
    }
    INIT_MS = Math.round(performance.now());
    document.body.setAttribute('data-init-ms', String(INIT_MS));
    if (window.location.hash === '#selftest') { selftest(); }
  }

  var INIT_MS = null;

  // Test mode for headless browsers (URL hash #selftest): render every trajectory, exercise a filter, the plot
  // (wheel zoom, drag zoom, pan, frame switch, z, a zoom window), the decision and VI fields (as a reviewer clicks
  // them) and the export, and write what happened into the DOM, where `chromium --dump-dom` shows it.
  function fire(target, type, props) {
    var ev;
    if (type === 'wheel') { ev = new WheelEvent('wheel', props); }
    else if (type.indexOf('mouse') === 0 || type === 'click' || type === 'dblclick') { ev = new MouseEvent(type, props); }
    else { ev = new Event(type, { bubbles: true }); }
    target.dispatchEvent(ev);
  }

  function inkFraction(canvas) {
    var ctx = canvas.getContext('2d'), img = ctx.getImageData(0, 0, canvas.width, canvas.height).data, ink = 0;
    for (var i = 0; i < img.length; i += 4) { if (img[i] < 100 && img[i + 1] < 100 && img[i + 2] < 100) { ink += 1; } }
    return ink / (img.length / 4);
  }

  function plotTest() {
    var plot = currentPlot, out = {};
    if (!plot) { return null; }
    var v = function () { var x = plot.view(); return [Math.round(x.lo * 100) / 100, Math.round(x.hi * 100) / 100, x.frame, x.z]; };
    out.initial = v();
    out.ink = inkFraction(plot.canvas);
    var rect = plot.canvas.getBoundingClientRect();
    var cx = rect.left + rect.width / 2, cy = rect.top + rect.height / 2;
    out.width = rect.width;
    fire(plot.canvas, 'wheel', { deltaY: -100, clientX: cx, clientY: cy, bubbles: true, cancelable: true });
    out.after_wheel = v();
    fire(plot.canvas, 'mousedown', { clientX: rect.left + 100, clientY: cy, button: 0, bubbles: true });
    fire(plot.canvas, 'mousemove', { clientX: rect.left + 300, clientY: cy, bubbles: true });
    fire(plot.canvas, 'mouseup', { clientX: rect.left + 300, clientY: cy, button: 0, bubbles: true });
    out.after_drag = v();
    fire(plot.canvas, 'mousedown', { clientX: rect.left + 300, clientY: cy, button: 0, shiftKey: true, bubbles: true });
    fire(plot.canvas, 'mousemove', { clientX: rect.left + 200, clientY: cy, shiftKey: true, bubbles: true });
    fire(plot.canvas, 'mouseup', { clientX: rect.left + 200, clientY: cy, button: 0, shiftKey: true, bubbles: true });
    out.after_pan = v();
    fire(plot.canvas, 'dblclick', { clientX: cx, clientY: cy, bubbles: true });
    out.after_reset = v();
    var frame = plot.root.querySelector('.specplot-frame');
    frame.value = 'obs'; fire(frame, 'change');
    out.observed = v();
    frame.value = 'rest'; fire(frame, 'change');
    var zIn = plot.root.querySelector('.specplot-z');
    zIn.value = '0.5'; fire(zIn, 'change');
    out.rest_z05 = v();
    out.vi_z_before = document.querySelector('#detail .vi-z').value;
    plot.root.querySelector('.specplot-use-z').click();
    out.vi_z_after = document.querySelector('#detail .vi-z').value;
    var lineBox = plot.root.querySelector('input[data-group="helium"]');
    lineBox.checked = true; fire(lineBox, 'change');
    var win = document.querySelector('#detail button.show-window');
    if (win) { win.click(); out.window = v(); }
    out.windows = plot.windows.map(function (w) { return [w.lo, w.hi]; });
    out.ink_after = inkFraction(plot.canvas);
    return out;
  }

  function formTest(c) {
    var form = function () { return document.querySelector('#detail .review-form'); };
    form().querySelector('button[data-decision="agree"]').click();
    form().querySelector('button[data-quality="3"]').click();
    var issue = form().querySelector('input[data-issue="S"]');
    issue.checked = true; fire(issue, 'change');
    var ta = form().querySelector('textarea.vi-comment');
    ta.value = 'selftest, "quoted", comma'; fire(ta, 'input');
    form().querySelector('.vi-std button').click();
    var stored = JSON.parse(storage().getItem(STORE_KEY) || '{}')[key(c)] || null;
    return stored;
  }

  function selftest() {
    var out = document.getElementById('selftest');
    var restored = JSON.parse(JSON.stringify(decisions));
    var ids = [];
    var cells = document.querySelectorAll('#list td.cid');
    for (var i = 0; i < cells.length; i++) { ids.push(cells[i].textContent); }
    var shownIds = {};
    var idNodes = document.querySelectorAll('#detail .ids dd');
    for (var j = 0; j < idNodes.length; j++) { shownIds[idNodes[j].previousSibling.textContent] = idNodes[j].textContent; }
    // the plot and the form are tried on the first candidate of this file that has a spectrum
    for (var p = 0; p < CANDS.length; p++) {
      var full = DETAILS[key(CANDS[p])];
      if (full && full.spectrum) { if (p !== state.current) { show(p); } break; }
    }
    var plot = plotTest();
    var stored = null;
    var first = CANDS[state.current];
    document.getElementById('reviewer').value = 'selftest';
    if (first && DETAILS[key(first)]) { stored = formTest(DETAILS[key(first)]); }
    var all = el('div');
    all.id = 'selftest-details';
    out.appendChild(all);
    var imgs = [], plots = 0;
    DATA.candidates.forEach(function (c) {
      var node = renderDetail(c, all);
      var found = node.querySelectorAll('img');
      for (var i = 0; i < found.length; i++) { imgs.push(found[i]); }
      plots += node.querySelectorAll('canvas').length;
    });
    var sel = document.getElementById('f-task');
    var task = sel.options.length > 1 ? sel.options[1].value : '';
    sel.value = task;
    applyFilters();
    var shown = document.querySelectorAll('#list tr').length;
    var expected = CANDS.filter(function (c) { return c.task === task; }).length;
    sel.value = '';
    applyFilters();
    if (CANDS.length > 1) { decide(CANDS[1], 'disagree'); }
    var csv = exportCsv();
    var loaded = imgs.map(function (img) { return img.decode().then(function () { return img.naturalWidth; }, function () { return 0; }); });
    Promise.all(loaded).then(function (widths) {
      var result = { ids_visible: ids, filter_task: task, filter_shown: shown, filter_expected: expected,
        image_widths: widths, csv: csv, xss: document.body.getAttribute('data-xss'), part: PART,
        parts: PARTS.length, details_here: DATA.candidates.map(function (c) { return c.candidate_id; }),
        shown: first ? first.candidate_id : null, shown_ids: shownIds, plot: plot, plots: plots,
        stored: stored, restored: restored, init_ms: INIT_MS,
        elsewhere: CANDS.map(function (c, i) { return DETAILS[key(c)] ? null : elsewhereUrl(i); }) };
      var pre = el('pre', null, JSON.stringify(result));
      pre.id = 'selftest-result';
      out.appendChild(pre);
    });
  }

  init();
})();
