// Correction methods per token in the token view (read before token_view.js, which calls fxInit, fxClass,
// fxLegend and fxDescribe; they read its D, mode, root and body at call time). The payload's D.delta.fix
// (viewer/render/fixes.py) carries the turn's trainer row: every trained token's sampler and trainer
// logprob as float32 values, where each sits in this view (at), each method's parameters (p) and the
// server's verdicts at them (st, painted first). A threshold slider recomputes its method here, in float32
// as viewer/rescore/corrections.py does (Math.fround after every operation, numpy's pairwise sums), and
// recolours the painted tokens: no server round trip (bench/bench_corrections_view.py times it).
const FIX_MODES = Object.freeze(['trl', 'verl', 'icepop', 'dppo', 'disagree']);
const FX_METHODS = FIX_MODES.slice(0, 4);
const FX_STATES = ['kept', 'clipped', 'masked'];
const FX_NAMES = {trl: 'TRL 1.16 GRPO IS', verl: 'verl rollout correction (IS weight)', icepop: 'prime-rl IcePop masks',
                  dppo: 'prime-rl DPPO masks'};
// verl's rejection-sampling options (compute_rollout_rejection_mask): token_k1 is MIS, seq_mean_k1 the geometric
// ratio; a k1 threshold x is the band [1/x, x] (verl's reading of a lone number), any other an upper bound
const FX_RS = ['token_k1', 'token_k2', 'token_k3', 'seq_sum_k1', 'seq_sum_k2', 'seq_sum_k3', 'seq_mean_k1',
               'seq_mean_k2', 'seq_mean_k3', 'seq_max_k2', 'seq_max_k3'];
// [param, [choices]] or [param, min, max, step]: the sliders and choices each mode offers ('none': null)
const FX_KNOBS = {
  trl: [['mode', ['token_truncate', 'token_mask', 'sequence_truncate', 'sequence_mask']], ['clip_max', 1, 10, 0.01],
        ['clip_min', 0, 0.99, 0.01]],
  verl: [['is_level', ['token', 'sequence', 'none']], ['is_threshold', 1, 10, 0.01], ['rs', ['none', ...FX_RS]],
         ['rs_threshold', 0.01, 10, 0.01]],
  icepop: [['token_mask_low', 0, 0.99, 0.005], ['token_mask_high', 1.01, 20, 0.01], ['geo_mask_low', 0, 0.99, 0.01],
           ['geo_mask_high', 1.01, 20, 0.01]],
  dppo: [['advantage', [1, -1, 0]], ['dppo_mask_low', 0, 1, 0.005], ['dppo_mask_high', 0, 1, 0.005]],
};
const f32 = Math.fround, FX_F32MAX = 3.4028234663852886e38;
const fxExp = x => f32(Math.exp(x));
const fxBound = (v, none) => (v === null || v === undefined ? none : f32(v));
let fx = null;  // {s, t, at, p, st / mine (server's / browser's verdicts per view position), w, r, row, a, b, err, ms}

// numpy's float32 sum (pairwise_sum: 8 accumulators per block of <= 128, halves above): the same bits.
function fxSum(a, lo, hi) {
  const n = hi - lo;
  if (n < 8) { let r = 0; for (let i = lo; i < hi; i++) r = f32(r + a[i]); return r; }
  if (n <= 128) {
    const r = new Float32Array(8);
    for (let j = 0; j < 8; j++) r[j] = a[lo + j];
    let i = 8;
    for (; i < n - (n % 8); i += 8) for (let j = 0; j < 8; j++) r[j] = f32(r[j] + a[lo + i + j]);
    let res = f32(f32(f32(r[0] + r[1]) + f32(r[2] + r[3])) + f32(f32(r[4] + r[5]) + f32(r[6] + r[7])));
    for (; i < n; i++) res = f32(res + a[lo + i]);
    return res;
  }
  let n2 = Math.floor(n / 2); n2 -= n2 % 8;
  return f32(fxSum(a, lo, lo + n2) + fxSum(a, lo + n2, hi));
}
const fxClamp = (x, lo, hi) => (x < lo ? lo : x > hi ? hi : x);  // NaN stays NaN (np.clip)
const fxMin = (x, hi) => (Number.isNaN(x) ? x : Math.min(x, hi));  // np.minimum
// verl's rejection mask on a row whose every token is trained (corrections.py's _rs_keep; a NaN fails)
function fxRsKeep(opt, thr, lr) {
  if (thr === null || thr === undefined) throw new Error('rollout_rs_threshold must be provided for rejection sampling.');
  const n = lr.length, k = new Float32Array(n), est = opt.slice(-2), x = Number(thr);
  if (!(x > 0)) throw new Error(`Threshold for option '${opt}' must be positive, got ${thr}.`);
  for (let i = 0; i < n; i++) {
    const safe = fxClamp(lr[i], -20, 20);
    k[i] = est === 'k1' ? -safe : est === 'k2' ? f32(f32(0.5 * safe) * safe) : f32(f32(fxExp(safe) - 1) - safe);
  }
  const ok = v => (est === 'k1' ? v >= f32(Math.log(1 / x)) && v <= f32(Math.log(x)) : v <= f32(x));
  const keep = new Uint8Array(n);
  if (opt.startsWith('token')) { for (let i = 0; i < n; i++) keep[i] = ok(k[i]) ? 1 : 0; return keep; }
  let stat;
  if (opt.startsWith('seq_max')) {
    stat = -Infinity;
    for (let i = 0; i < n; i++) stat = Number.isNaN(stat) || Number.isNaN(k[i]) ? NaN : Math.max(stat, k[i]);
    if (stat === -Infinity) stat = 0;
  } else {
    stat = fxSum(k, 0, n);
    if (opt.startsWith('seq_mean')) stat = f32(stat / f32(f32(n) + f32(1e-8)));
  }
  return keep.fill(ok(stat) ? 1 : 0);
}
function fxLogRatio(s, t) { const n = s.length, lr = new Float32Array(n); for (let i = 0; i < n; i++) lr[i] = t[i] - s[i]; return lr; }

// Each method on one row whose every token is trained: per token state (0 kept, 1 clipped, 2 masked),
// weight and the ratio it looks at. Formulas and their sources: viewer/rescore/corrections.py.
const FX_CALC = {
  trl(s, t, p) {
    const n = s.length, seq = p.mode.startsWith('sequence'), trunc = p.mode.endsWith('_truncate');
    const lo = fxBound(p.clip_min, -Infinity), hi = fxBound(p.clip_max, Infinity);
    const d = fxLogRatio(s, t);  // nan_to_num: NaN → 0, ±inf → ±float32 max
    for (let i = 0; i < n; i++) d[i] = Number.isNaN(d[i]) ? 0 : fxClamp(d[i], -FX_F32MAX, FX_F32MAX);
    const one = seq ? fxExp(fxSum(d, 0, n)) : 0;
    const st = new Int8Array(n), w = new Float64Array(n), r = new Float64Array(n);
    for (let i = 0; i < n; i++) {
      const raw = seq ? one : fxExp(d[i]), changed = raw < lo || raw > hi;
      r[i] = raw; w[i] = trunc ? fxClamp(raw, lo, hi) : (changed ? 0 : raw);
      st[i] = changed ? (trunc ? 1 : 2) : 0;
    }
    return {st, w, r};
  },
  verl(s, t, p) {
    const n = s.length, lr = fxLogRatio(s, t), thr = fxBound(p.is_threshold, Infinity), lvl = p.is_level;
    const one = lvl === 'sequence' ? fxExp(fxClamp(fxSum(lr, 0, n), -20, 20)) : 0;
    const st = new Int8Array(n), w = new Float64Array(n), r = new Float64Array(n);
    for (let i = 0; i < n; i++) {
      const raw = lvl === 'sequence' ? one : fxExp(fxClamp(lr[i], -20, 20));
      r[i] = raw; w[i] = lvl ? fxMin(raw, thr) : 1; st[i] = lvl && raw > thr ? 1 : 0;
    }
    if (p.rs) {  // rejected tokens: weight 0, masked (over clipped, as corrections.py's _state)
      const keep = fxRsKeep(p.rs, p.rs_threshold, lr);
      for (let i = 0; i < n; i++) if (!keep[i]) { w[i] = 0; st[i] = 2; }
    }
    return {st, w, r};
  },
  icepop(s, t, p) {
    const n = s.length, lr = fxLogRatio(s, t), tr = new Float32Array(n);
    let lo = Infinity, hi = -Infinity;
    for (let i = 0; i < n; i++) { tr[i] = fxExp(lr[i]); lo = Math.min(lo, tr[i]); hi = Math.max(hi, tr[i]); }
    const total = fxSum(lr, 0, n), geo = fxExp(f32(total / f32(Math.max(n, 1))));
    const b = k => f32(p[k]);
    const whole = geo < b('geo_mask_low') || geo > b('geo_mask_high') || lo < b('sequence_mask_low') ||
      hi > b('sequence_mask_high');
    const st = new Int8Array(n), w = new Float64Array(n), r = new Float64Array(n);
    for (let i = 0; i < n; i++) {
      const masked = whole || tr[i] < b('token_mask_low') || tr[i] > b('token_mask_high');
      let raw = tr[i], ratio = raw, clipped = false;
      if (p.ratio_type === 'sequence') {  // clamp(exp(min(Σ log r, 10)), max=sequence_clip_high)
        raw = fxExp(fxMin(f32(f32(t[i] - t[i]) + total), 10)); ratio = fxMin(raw, b('sequence_clip_high'));
        clipped = raw > b('sequence_clip_high');
      }
      r[i] = raw; w[i] = masked ? 0 : ratio; st[i] = masked ? 2 : clipped ? 1 : 0;
    }
    return {st, w, r};
  },
  dppo(s, t, p) {
    const n = s.length, pos = f32(p.advantage) > 0, hi = f32(p.dppo_mask_high), lo = f32(p.dppo_mask_low);
    const st = new Int8Array(n), w = new Float64Array(n), r = new Float64Array(n);
    for (let i = 0; i < n; i++) {
      const ratio = fxExp(f32(t[i] - s[i])), dp = f32(fxExp(t[i]) - fxExp(s[i]));
      const masked = pos ? dp > hi : dp < -lo;
      r[i] = ratio; w[i] = masked ? 0 : ratio; st[i] = masked ? 2 : 0;
    }
    return {st, w, r};
  },
};

function fxInit() {
  const was = fx;  // the thresholds and methods the user set stay while turns change (as the colour mode does)
  fx = root._fx = null;  // root._fx: the state, for tests and benches to read
  const F = D && D.delta && D.delta.fix;
  if (!F) return;
  const num = x => f32(typeof x === 'string' ? Number(x) : x);  // NaN / ±Infinity travel as strings
  const n = D.ids.length;
  fx = {s: Float32Array.from(F.s, num), t: Float32Array.from(F.t, num), at: F.at, p: F.p, err: F.err || {},
        st: {}, w: {}, r: {}, row: {}, mine: {}, a: 'trl', b: 'icepop', ms: null};
  for (const m of FX_METHODS) {
    fxRun(m);  // weights and ratios for the hover, and the browser's own verdicts (tests compare them)
    fx.mine[m] = fx.st[m];
    const got = F.st[m];
    if (typeof got === 'string' && got.length === n) {  // the server's verdicts are what is painted first
      const st = new Int8Array(n).fill(-1);
      for (let i = 0; i < n; i++) { const c = got.charCodeAt(i) - 48; if (c >= 0 && c <= 2) st[i] = c; }
      fx.st[m] = st;
    }
  }
  if (was) {
    fx.a = was.a; fx.b = was.b;
    for (const m of FX_METHODS) {
      if (JSON.stringify(was.p[m]) !== JSON.stringify(fx.p[m])) { fx.p[m] = was.p[m]; fxRun(m); }
    }
  }
  root._fx = fx;
}

function fxRun(m) {
  const n = D.ids.length, st = new Int8Array(n).fill(-1), w = new Float64Array(n), r = new Float64Array(n);
  let row = null;
  try { row = FX_CALC[m](fx.s, fx.t, fx.p[m]); delete fx.err[m]; } catch (e) { fx.err[m] = String(e); }
  if (row) for (let k = 0; k < fx.at.length; k++) {
    const i = fx.at[k];
    if (i >= 0) { st[i] = row.st[k]; w[i] = row.w[k]; r[i] = row.r[k]; }
  }
  fx.st[m] = st; fx.w[m] = w; fx.r[m] = r; fx.row[m] = row;
}

function fxClass(i, m) {
  if (!fx || D.k[i] === KIND.CONTEXT) return '';
  if (m === 'disagree') {
    const a = fx.st[fx.a], b = fx.st[fx.b];
    return a && b && a[i] >= 0 && b[i] >= 0 ? (a[i] !== b[i] ? ' xd' : ' xs') : '';
  }
  const st = fx.st[m];
  return st && st[i] >= 0 ? ' x' + st[i] : '';
}

// The counts a slider updates: the row's trained tokens (all its turns) per state; the row (sequence) is
// masked if any token is, else clipped if any is; disagree: tokens the two methods treat differently.
function fxCounts() {
  if (!fx) return '';
  const row = m => fx.row[m] ? fx.row[m].st : null;
  if (mode === 'disagree') {
    const a = row(fx.a), b = row(fx.b);
    if (!a || !b) return 'a method has no verdicts (see its error)';
    const pairs = {};
    let d = 0;
    for (let k = 0; k < a.length; k++) if (a[k] !== b[k]) { d++; const key = `${FX_STATES[a[k]]}/${FX_STATES[b[k]]}`; pairs[key] = (pairs[key] || 0) + 1; }
    return `${d.toLocaleString()} of ${a.length.toLocaleString()} trained tokens of the row differ (${fx.a}/${fx.b}` +
      (d ? ': ' + Object.entries(pairs).map(([k, v]) => `${k} ${v}`).join(', ') : '') + ')';
  }
  const st = row(mode);
  if (!st) return `${mode}: ${fx.err[mode] || 'no verdicts'}`;
  const c = [0, 0, 0];
  for (const x of st) c[x]++;
  const seq = c[2] ? 'masked' : c[1] ? 'clipped' : 'kept';
  return `row: ${c[0].toLocaleString()} kept · ${c[1].toLocaleString()} clipped · ${c[2].toLocaleString()} masked of ` +
    `${st.length.toLocaleString()} trained tokens · the sequence is ${seq}`;
}

// A slider or choice moved: that method again, then the painted tokens recoloured (no redraw).
function fxSet(m, k, v) {
  const t0 = performance.now();
  fx.p[m] = {...fx.p[m], [k]: v};
  fxRun(m);
  const re = / x[012ds]\b/g;
  // a static list: setting className while walking a live getElementsByClassName re-walks it (quadratic)
  for (const s of body.querySelectorAll('.tk')) {
    const c = s.className, k = c.replace(re, '') + fxClass(s._i, mode);
    if (k !== c) s.className = k;
  }
  const line = bar.querySelector('.ri-fx-counts');
  if (line) line.textContent = fxCounts();
  fx.ms = performance.now() - t0;
  root.dataset.fxMs = fx.ms.toFixed(2);
  root.dataset.fxSet = String(Number(root.dataset.fxSet || 0) + 1);
}

function fxKnobs(m) {
  const box = el('span', 'ri-fx-knobs');
  box.dataset.method = m;
  box.appendChild(el('span', 'ri-lg-t', FX_NAMES[m] + ':'));
  for (const [k, ...spec] of FX_KNOBS[m]) {
    const lab = el('label', 'ri-fx-knob');
    lab.appendChild(el('span', '', k + ' '));
    const v = fx.p[m][k];
    if (Array.isArray(spec[0])) {
      const sel = el('select');
      sel.dataset.param = k;
      for (const c of spec[0]) { const o = el('option', '', String(c)); o.value = String(c); sel.appendChild(o); }
      sel.value = v === null || v === undefined ? 'none' : String(v);
      sel.onchange = () => {
        const x = sel.value === 'none' ? null : typeof spec[0][0] === 'number' ? Number(sel.value) : sel.value;
        if (k === 'rs' && x && (fx.p[m].rs_threshold === null || fx.p[m].rs_threshold === undefined)) {
          fx.p[m] = {...fx.p[m], rs_threshold: 2};  // a rejection option needs a threshold: the slider's start
          const r = sel.closest('.ri-fx-knobs').querySelector('input[data-param="rs_threshold"]');
          if (r) { r.value = '2'; r.nextSibling.textContent = '2'; }
        }
        fxSet(m, k, x);
      };
      lab.appendChild(sel);
    } else {
      const [lo, hi, step] = spec, out = el('span', 'ri-fx-v', v === null || v === undefined ? 'none' : String(v));
      const inp = el('input');
      Object.assign(inp, {type: 'range', min: lo, max: hi, step});
      inp.dataset.param = k;
      inp.value = String(v === null || v === undefined ? lo : v);
      inp.oninput = () => { const x = Number(inp.value); out.textContent = String(x); fxSet(m, k, k === 'clip_min' && x === 0 ? null : x); };
      lab.append(inp, out);
    }
    box.appendChild(lab);
  }
  return box;
}

function fxLegend(legend) {
  if (mode === 'disagree') {
    legend.append(el('span', 'tk xd', 'treated differently'), el('span', 'tk xs', 'same'));
    for (const side of ['a', 'b']) {
      const sel = el('select', 'ri-fx-pick');
      sel.dataset.side = side;
      for (const m of FX_METHODS) { const o = el('option', '', m); o.value = m; sel.appendChild(o); }
      sel.value = fx[side];
      sel.onchange = () => { fx[side] = sel.value; drawBar(); draw(); };
      legend.appendChild(sel);
    }
  } else {
    legend.appendChild(el('span', 'ri-lg-t', FX_NAMES[mode]));
    FX_STATES.forEach((s, i) => legend.appendChild(el('span', 'tk x' + i, s)));
  }
  const panel = el('span', 'ri-fx');
  for (const m of mode === 'disagree' ? [fx.a, fx.b] : [mode]) panel.appendChild(fxKnobs(m));
  panel.appendChild(el('span', 'ri-fx-counts', fxCounts()));
  legend.appendChild(panel);
}

function fxDescribe(i, lines) {
  if (!fx || !FIX_MODES.includes(mode) || i < D.prompt_len) return;
  for (const m of FX_METHODS) {
    const st = fx.st[m];
    if (fx.err[m]) { lines.push(`${m}: ${fx.err[m]}`); continue; }
    if (!st || st[i] < 0) continue;
    lines.push(`${m}: ${FX_STATES[st[i]].toUpperCase()} · ratio ${fx.r[m][i].toPrecision(6)} · weight ${fx.w[m][i].toPrecision(6)}`);
  }
}
