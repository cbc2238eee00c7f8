// Interactive spectrum plot of the review page, on a plain <canvas> (no library: nothing but this code runs under
// the page's CSP). Flux, noise (1/sqrt(ivar)), masked pixels shaded, line markers from spec_vetting/lines.py, the
// agent's zoom windows; drag to zoom, shift+drag (or middle button) to pan, wheel to zoom at the cursor,
// double-click to reset; observed or rest frame with a reviewer-set z; Gaussian smoothing weighted by ivar
// (as prospect's smooth_data.js does). Text only ever goes in with textContent.
(function () {
  'use strict';

  var GROUP_COLORS = { balmer: '#c0392b', helium: '#8e44ad', calcium: '#1f7a4d', sodium: '#b9770e',
    bands: '#6e2c00', qso: '#1f5fa8' };
  var MARGIN = { left: 62, right: 12, top: 16, bottom: 34 };

  // 16-bit packed values (page.py _pack) -> Float64Array; 65535 is missing (NaN)
  function unpack(p, n) {
    var bin = atob(p.q);
    var out = new Float64Array(n);
    var span = p.hi - p.lo;
    for (var i = 0; i < n; i++) {
      var q = bin.charCodeAt(2 * i) | (bin.charCodeAt(2 * i + 1) << 8);
      out[i] = q === 65535 ? NaN : p.lo + (q / 65534) * span;
    }
    return out;
  }

  // Gaussian kernel of sigma = n bins over +-2 sigma, weighted by ivar (1/noise^2) where known
  function smooth(flux, noise, n) {
    if (!n) { return flux; }
    var half = Math.ceil(2 * n), kernel = [];
    for (var k = -half; k <= half; k++) { kernel.push(Math.exp(-(k * k) / (2 * n * n))); }
    var out = new Float64Array(flux.length);
    for (var j = 0; j < flux.length; j++) {
      var s = 0, w = 0;
      for (var i = 0; i < kernel.length; i++) {
        var m = j + i - half;
        if (m < 0 || m >= flux.length || !isFinite(flux[m])) { continue; }
        var iv = isFinite(noise[m]) && noise[m] > 0 ? 1 / (noise[m] * noise[m]) : 0;
        var kw = kernel[i] * (iv > 0 ? iv : 1e-12);
        s += flux[m] * kw; w += kw;
      }
      out[j] = w > 0 ? s / w : NaN;
    }
    return out;
  }

  function niceStep(span, ticks) {
    var raw = span / Math.max(1, ticks), mag = Math.pow(10, Math.floor(Math.log(raw) / Math.LN10));
    var r = raw / mag;
    return (r < 1.5 ? 1 : r < 3 ? 2 : r < 7 ? 5 : 10) * mag;
  }

  function fmtTick(v, step) {
    var d = Math.max(0, -Math.floor(Math.log(step) / Math.LN10 + 1e-9));
    return v.toFixed(Math.min(d, 6));
  }

  function fmtZ(z) { return String(Number(Number(z).toFixed(6))); }

  function lowerBound(arr, x) {
    var lo = 0, hi = arr.length;
    while (lo < hi) { var mid = (lo + hi) >> 1; if (arr[mid] < x) { lo = mid + 1; } else { hi = mid; } }
    return lo;
  }

  function el(tag, cls, text) {
    var e = document.createElement(tag);
    if (cls) { e.className = cls; }
    if (text !== undefined && text !== null) { e.textContent = String(text); }
    return e;
  }

  // spec: page.py spectrum_payload; opts: {zRun, z, frame: 'rest'|'obs', windows: [{lo, hi, label}] (rest frame of
  // zRun, as the zoom tool), lines: [[name, rest wavelength, group]], groups: {id: label}, onUseZ: function (z)}
  function create(container, spec, opts) {
    var wave = unpack(spec.wave, spec.n), flux = unpack(spec.flux, spec.n), noise = unpack(spec.noise, spec.n);
    var st = {
      zRun: isFinite(opts.zRun) ? opts.zRun : 0, z: isFinite(opts.z) ? opts.z : 0,
      frame: opts.frame || 'rest', smoothN: 0, shown: flux, lo: NaN, hi: NaN, highlight: -1,
      groups: {}, drag: null
    };
    Object.keys(opts.groups || {}).forEach(function (g) { st.groups[g] = g === 'balmer'; });
    var root = el('div', 'specplot');
    var bar = el('div', 'specplot-bar');
    var canvas = el('canvas', 'specplot-canvas');
    var status = el('div', 'specplot-status');
    root.appendChild(bar);
    root.appendChild(canvas);
    root.appendChild(status);
    container.appendChild(root);

    function control(label, input) {
      var l = el('label', null, label + ' ');
      l.appendChild(input);
      bar.appendChild(l);
      return input;
    }
    var frameSel = el('select', 'specplot-frame');
    [['rest', 'rest frame'], ['obs', 'observed']].forEach(function (f) {
      var o = el('option', null, f[1]); o.value = f[0]; frameSel.appendChild(o);
    });
    frameSel.value = st.frame;
    control('frame', frameSel);
    var zIn = el('input', 'specplot-z');
    zIn.type = 'text'; zIn.size = 9; zIn.value = fmtZ(st.z);
    control('z', zIn);
    if (opts.onUseZ) {  // the plot's z is for looking; the VI redshift is set only on purpose
      var useZ = el('button', 'specplot-use-z', 'use as VI z');
      useZ.type = 'button'; useZ.title = 'copy this z into the VI redshift field';
      useZ.addEventListener('click', function () { opts.onUseZ(Number(fmtZ(st.z))); });
      bar.appendChild(useZ);
    }
    var smoothSel = el('select', 'specplot-smooth');
    [0, 1, 2, 3, 5, 10].forEach(function (n) {
      var o = el('option', null, n ? 'sigma ' + n + ' px' : 'none'); o.value = String(n); smoothSel.appendChild(o);
    });
    control('smooth', smoothSel);
    function button(text, title, fn, cls) {
      var b = el('button', cls || null, text); b.type = 'button'; b.title = title;
      b.addEventListener('click', fn); bar.appendChild(b); return b;
    }
    button('\u2212', 'zoom out', function () { zoomBy(1.6, (st.lo + st.hi) / 2); }, 'specplot-out');
    button('+', 'zoom in', function () { zoomBy(1 / 1.6, (st.lo + st.hi) / 2); }, 'specplot-in');
    button('\u25c0', 'pan left', function () { panBy(-(st.hi - st.lo) * 0.3); });
    button('\u25b6', 'pan right', function () { panBy((st.hi - st.lo) * 0.3); });
    button('reset', 'whole spectrum (or double-click the plot)', function () { reset(); }, 'specplot-reset');
    var lineBox = el('div', 'specplot-lines');
    Object.keys(opts.groups || {}).forEach(function (g) {
      var l = el('label', null);
      var cb = el('input'); cb.type = 'checkbox'; cb.checked = st.groups[g]; cb.setAttribute('data-group', g);
      cb.addEventListener('change', function () { st.groups[g] = cb.checked; draw(); });
      l.appendChild(cb);
      var sw = el('span', 'swatch', opts.groups[g]);
      sw.style.color = GROUP_COLORS[g] || '#333';
      l.appendChild(sw);
      lineBox.appendChild(l);
    });
    root.insertBefore(lineBox, canvas);

    function factor() { return st.frame === 'rest' ? 1 + st.z : 1; }
    function fullRange() {
      var f = factor(), a = 0, b = wave.length - 1;
      return [wave[a] / f, wave[b] / f];
    }
    function size() {
      var w = Math.max(320, (root.clientWidth || container.clientWidth || 760) - 2);
      return { w: w, h: 300 };
    }
    function plotBox(sz) {
      return { x0: MARGIN.left, x1: sz.w - MARGIN.right, y0: MARGIN.top, y1: sz.h - MARGIN.bottom };
    }

    var lastWidth = 0;
    function draw() {
      var sz = size(), dpr = window.devicePixelRatio || 1;
      lastWidth = sz.w;
      if (canvas.width !== Math.round(sz.w * dpr)) {
        canvas.width = Math.round(sz.w * dpr); canvas.height = Math.round(sz.h * dpr);
        canvas.style.width = sz.w + 'px'; canvas.style.height = sz.h + 'px';
      }
      var ctx = canvas.getContext('2d');
      ctx.setTransform(dpr, 0, 0, dpr, 0, 0);
      ctx.clearRect(0, 0, sz.w, sz.h);
      ctx.fillStyle = '#fff';
      ctx.fillRect(0, 0, sz.w, sz.h);
      var box = plotBox(sz), f = factor();
      var i0 = Math.max(0, lowerBound(wave, st.lo * f) - 1), i1 = Math.min(wave.length, lowerBound(wave, st.hi * f) + 1);
      var vals = [];
      for (var i = i0; i < i1; i++) { if (isFinite(st.shown[i])) { vals.push(st.shown[i]); } }
      vals.sort(function (a, b) { return a - b; });
      var ylo = vals.length ? vals[Math.floor(0.005 * (vals.length - 1))] : 0;
      var yhi = vals.length ? vals[Math.ceil(0.995 * (vals.length - 1))] : 1;
      if (!(yhi > ylo)) { yhi = ylo + 1; }
      var pad = (yhi - ylo) * 0.08; ylo -= pad; yhi += pad;
      var sx = (box.x1 - box.x0) / (st.hi - st.lo), sy = (box.y1 - box.y0) / (yhi - ylo);
      function X(x) { return box.x0 + (x - st.lo) * sx; }
      function Y(y) { return box.y1 - (y - ylo) * sy; }
      ctx.save();
      ctx.beginPath(); ctx.rect(box.x0, box.y0, box.x1 - box.x0, box.y1 - box.y0); ctx.clip();
      // masked pixels
      ctx.fillStyle = 'rgba(214, 48, 49, 0.16)';
      (spec.mask || []).forEach(function (r) {
        var a = wave[r[0]] / f, b = wave[r[1]] / f, halfA = (r[0] > 0 ? wave[r[0]] - wave[r[0] - 1] : 1) / f / 2;
        var halfB = (r[1] + 1 < wave.length ? wave[r[1] + 1] - wave[r[1]] : 1) / f / 2;
        if (b + halfB < st.lo || a - halfA > st.hi) { return; }
        ctx.fillRect(X(a - halfA), box.y0, Math.max(1, X(b + halfB) - X(a - halfA)), box.y1 - box.y0);
      });
      // the agent's zoom windows (rest frame of zRun -> observed -> this frame)
      (opts.windows || []).forEach(function (win, k) {
        var a = win.lo * (1 + st.zRun) / f, b = win.hi * (1 + st.zRun) / f;
        if (b < st.lo || a > st.hi) { return; }
        ctx.fillStyle = k === st.highlight ? 'rgba(41, 128, 255, 0.22)' : 'rgba(41, 128, 255, 0.08)';
        ctx.fillRect(X(a), box.y0, X(b) - X(a), box.y1 - box.y0);
        ctx.fillStyle = '#1f5fa8'; ctx.font = '11px sans-serif';
        ctx.fillText(win.label, Math.max(box.x0 + 2, X(a) + 2), box.y0 + 11);
      });
      // line markers
      ctx.font = '10px sans-serif';
      (opts.lines || []).forEach(function (ln) {
        if (!st.groups[ln[2]]) { return; }
        var x = st.frame === 'rest' ? ln[1] : ln[1] * (1 + st.z);
        if (x < st.lo || x > st.hi) { return; }
        ctx.strokeStyle = GROUP_COLORS[ln[2]] || '#333'; ctx.fillStyle = ctx.strokeStyle;
        ctx.setLineDash([4, 3]); ctx.lineWidth = 1;
        ctx.beginPath(); ctx.moveTo(X(x), box.y0 + 14); ctx.lineTo(X(x), box.y1); ctx.stroke();
        ctx.setLineDash([]);
        ctx.save(); ctx.translate(X(x) + 3, box.y0 + 16); ctx.rotate(Math.PI / 2); ctx.fillText(ln[0], 0, 0); ctx.restore();
      });
      function polyline(arr, color, width) {
        ctx.strokeStyle = color; ctx.lineWidth = width; ctx.beginPath();
        var pen = false;
        for (var i = i0; i < i1; i++) {
          if (!isFinite(arr[i])) { pen = false; continue; }
          var px = X(wave[i] / f), py = Y(arr[i]);
          if (pen) { ctx.lineTo(px, py); } else { ctx.moveTo(px, py); pen = true; }
        }
        ctx.stroke();
      }
      polyline(noise, '#9aa4b2', 1);
      polyline(st.shown, '#1d2430', 1.1);
      if (st.drag && st.drag.mode === 'select') {
        ctx.fillStyle = 'rgba(255, 196, 0, 0.25)';
        ctx.fillRect(Math.min(st.drag.x0, st.drag.x), box.y0, Math.abs(st.drag.x - st.drag.x0), box.y1 - box.y0);
      }
      ctx.restore();
      // axes
      ctx.strokeStyle = '#555'; ctx.lineWidth = 1; ctx.strokeRect(box.x0, box.y0, box.x1 - box.x0, box.y1 - box.y0);
      ctx.fillStyle = '#333'; ctx.font = '11px sans-serif';
      var xs = niceStep(st.hi - st.lo, (box.x1 - box.x0) / 90);
      for (var t = Math.ceil(st.lo / xs) * xs; t <= st.hi; t += xs) {
        ctx.beginPath(); ctx.moveTo(X(t), box.y1); ctx.lineTo(X(t), box.y1 + 4); ctx.stroke();
        var label = fmtTick(t, xs);
        ctx.fillText(label, X(t) - ctx.measureText(label).width / 2, box.y1 + 15);
      }
      var ys = niceStep(yhi - ylo, (box.y1 - box.y0) / 45);
      for (var u = Math.ceil(ylo / ys) * ys; u <= yhi; u += ys) {
        ctx.beginPath(); ctx.moveTo(box.x0 - 4, Y(u)); ctx.lineTo(box.x0, Y(u)); ctx.stroke();
        var yl = fmtTick(u, ys);
        ctx.fillText(yl, box.x0 - 6 - ctx.measureText(yl).width, Y(u) + 4);
      }
      var xlabel = (st.frame === 'rest' ? 'rest-frame wavelength (\u00c5), z = ' + fmtZ(st.z) : 'observed wavelength (\u00c5)');
      ctx.fillText(xlabel, (box.x0 + box.x1) / 2 - ctx.measureText(xlabel).width / 2, sz.h - 4);
      ctx.fillText('flux' + (spec.unit ? ' (' + spec.unit + ')' : ' (relative)'), 4, 11);
      root.setAttribute('data-lo', st.lo.toFixed(2));
      root.setAttribute('data-hi', st.hi.toFixed(2));
      root.setAttribute('data-frame', st.frame);
      root.setAttribute('data-z', String(st.z));
      status.textContent = st.lo.toFixed(1) + ' - ' + st.hi.toFixed(1) + ' \u00c5 (' +
        (st.frame === 'rest' ? 'rest frame, z = ' + fmtZ(st.z) : 'observed frame') + '); ' + spec.n + ' points' +
        (spec.binned > 1 ? ' (' + spec.n_pixels + ' pixels binned by ' + spec.binned + ')' : '') +
        '; drag: zoom, shift+drag: pan, wheel: zoom, double-click: reset';
    }

    function clampRange(lo, hi) {
      var full = fullRange(), span = full[1] - full[0];
      var w = Math.max(2, Math.min(hi - lo, span * 1.2));
      if (hi - lo !== w) { var c = (lo + hi) / 2; lo = c - w / 2; hi = c + w / 2; }
      if (lo < full[0] - span * 0.1) { hi += full[0] - span * 0.1 - lo; lo = full[0] - span * 0.1; }
      if (hi > full[1] + span * 0.1) { lo -= hi - full[1] - span * 0.1; hi = full[1] + span * 0.1; }
      return [lo, hi];
    }
    function setRange(lo, hi) {
      if (!(hi > lo)) { return; }
      var r = clampRange(lo, hi); st.lo = r[0]; st.hi = r[1]; draw();
    }
    function zoomBy(k, at) { setRange(at - (at - st.lo) * k, at + (st.hi - at) * k); }
    function panBy(dx) { setRange(st.lo + dx, st.hi + dx); }
    function reset() { var r = fullRange(); st.lo = r[0]; st.hi = r[1]; st.highlight = -1; draw(); }
    function setFrame(frame) {
      if (frame === st.frame) { return; }
      var k = (frame === 'rest') ? 1 / (1 + st.z) : (1 + st.z);  // keep the same piece of spectrum in view
      st.frame = frame; frameSel.value = frame;
      setRange(st.lo * k, st.hi * k);
    }
    function setZ(z) {
      if (!isFinite(z) || z <= -1) { return false; }
      if (st.frame === 'rest') {
        var k = (1 + st.z) / (1 + z); st.z = z; setRange(st.lo * k, st.hi * k);
      } else { st.z = z; draw(); }
      zIn.value = fmtZ(z);
      return true;
    }
    function setSmooth(n) { st.smoothN = n; st.shown = smooth(flux, noise, n); smoothSel.value = String(n); draw(); }
    // show the agent's k-th window, with a margin, in the current frame
    function showWindow(k) {
      var win = opts.windows[k];
      if (!win) { return; }
      var f = factor(), a = win.lo * (1 + st.zRun) / f, b = win.hi * (1 + st.zRun) / f, m = (b - a) * 0.1;
      st.highlight = k;
      setRange(a - m, b + m);
    }

    frameSel.addEventListener('change', function () { setFrame(frameSel.value); });
    zIn.addEventListener('change', function () {
      var z = Number(zIn.value);
      if (zIn.value.trim() === '' || !setZ(z)) { zIn.value = fmtZ(st.z); }
    });
    smoothSel.addEventListener('change', function () { setSmooth(Number(smoothSel.value)); });

    function dataX(ev) {
      var rect = canvas.getBoundingClientRect(), sz = size(), box = plotBox(sz);
      var px = (ev.clientX - rect.left) * (rect.width > 0 ? lastWidth / rect.width : 1);
      return { px: px, x: st.lo + (px - box.x0) / (box.x1 - box.x0) * (st.hi - st.lo), box: box };
    }
    canvas.addEventListener('mousedown', function (ev) {
      var p = dataX(ev);
      st.drag = { mode: ev.shiftKey || ev.button === 1 ? 'pan' : 'select', x0: p.px, x: p.px, lo: st.lo, hi: st.hi };
      ev.preventDefault();
    });
    canvas.addEventListener('mousemove', function (ev) {
      if (!st.drag) { return; }
      var p = dataX(ev);
      st.drag.x = p.px;
      if (st.drag.mode === 'pan') {
        var dx = (p.px - st.drag.x0) / (p.box.x1 - p.box.x0) * (st.drag.hi - st.drag.lo);
        var r = clampRange(st.drag.lo - dx, st.drag.hi - dx); st.lo = r[0]; st.hi = r[1];
      }
      draw();
    });
    function endDrag(ev) {
      if (!st.drag) { return; }
      var d = st.drag, p = dataX(ev);
      st.drag = null;
      if (d.mode === 'select' && Math.abs(p.px - d.x0) > 4) {
        var scale = (d.hi - d.lo) / (p.box.x1 - p.box.x0);
        var a = d.lo + (Math.min(p.px, d.x0) - p.box.x0) * scale, b = d.lo + (Math.max(p.px, d.x0) - p.box.x0) * scale;
        setRange(a, b);
      } else { draw(); }
    }
    canvas.addEventListener('mouseup', endDrag);
    canvas.addEventListener('mouseleave', function (ev) { if (st.drag) { endDrag(ev); } });
    canvas.addEventListener('wheel', function (ev) {
      ev.preventDefault();
      zoomBy(ev.deltaY > 0 ? 1.25 : 0.8, dataX(ev).x);
    }, { passive: false });
    canvas.addEventListener('dblclick', function () { reset(); });

    reset();
    // redraw at the new width when the pane changes size (window resized, a scrollbar appears)
    if (window.ResizeObserver) {
      var seen = root.clientWidth;
      new window.ResizeObserver(function () {
        if (Math.abs(root.clientWidth - seen) > 1) { seen = root.clientWidth; draw(); }
      }).observe(root);
    }
    return {
      root: root, canvas: canvas, reset: reset, setRange: setRange, setFrame: setFrame, setZ: setZ,
      setSmooth: setSmooth, showWindow: showWindow, redraw: draw,
      view: function () { return { lo: st.lo, hi: st.hi, frame: st.frame, z: st.z, smooth: st.smoothN }; }
    };
  }

  window.SpecPlot = { create: create, unpack: unpack, smooth: smooth };
})();
