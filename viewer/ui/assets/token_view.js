// Token view: draws one turn's tokens from a JSON string (props.value) built by
// viewer/render/payload.py::token_payload (expanded by riExpandTokens, token_payload.js). Safe by construction: data only ever reaches
// the DOM through textContent / className, never innerHTML. One delegated hover
// handler reads the side arrays, so per-token markup is a bare <span class>.
// What a position is to the trainer (the payload's k), as viewer/render/payload.py::Kind names
// them; tests/test_render_payload.py checks the two agree. CSS classes are 'k' + the code.
const KIND = Object.freeze({CONTEXT: 0, TRAINED: 1, UNTRAINED: 2});
const root = element.querySelector('.ri-tv');
const bar = root.querySelector('.ri-tv-bar');
const body = root.querySelector('.ri-tv-body');
const tip = root.querySelector('.ri-tip');
const detail = root.querySelector('.ri-tv-detail');
// Logprob buckets (upper-exclusive thresholds, descending): b0 is "confident".
const CUTS = [-0.1, -0.5, -1, -2, -3, -5, -8];
const CUT_LABELS = ['≥ -0.1', '-0.5', '-1', '-2', '-3', '-5', '-8', '< -8'];
// Δ = trainer − sampler logprob (a rescore): a diverging scale, d4 = numerically equal.
const DCUTS = [-1, -0.5, -0.2, -0.05, 0.05, 0.2, 0.5, 1];
const DCUT_LABELS = ['≤ -1', '-0.5', '-0.2', '-0.05', '±0.05', '+0.2', '+0.5', '+1', '> 1'];
let D = null, mode = 'mask', page = 0, showAll = false, sel = [-1, -1];
let spSet = new Set(), oovSet = new Set();
// Drift marks ({turn, list: [[start, end, label]]}) arrive by the 'ri-marks' event (presenter
// mode); markSet maps a position of the current turn to its label. Shown while .show-drift is on.
let marks = {turn: null, list: []}, markSet = new Map();
// Note marks (viewer/ui/assets/talk.js): the same event with layer 'notes', always shown (.nt).
let noteMarks = {turn: null, list: []}, noteSet = new Map();
// Events may name the view they are for (the page can hold several token views).
const myId = (element.closest('.block') || element).id || '';  // the component's elem_id
const forMe = e => !(e.detail && typeof e.detail === 'object' && e.detail.target && e.detail.target !== myId);

// The page's address follows the main view's colour mode (a reload or a shared address keeps it).
function followUrl() {
  if (myId !== 'token-view') return;
  const u = new URL(location.href);
  if (mode === 'mask') u.searchParams.delete('mode'); else u.searchParams.set('mode', mode);
  if (u.href !== location.href) history.replaceState(history.state, '', u.href);
}

function bucket(lp) {
  if (lp === null || lp === undefined) return -1;
  let b = 0;
  while (b < CUTS.length && lp < CUTS[b]) b++;
  return b;
}
function dbucket(d) {
  if (d === null || d === undefined) return -1;
  let b = 0;
  while (b < DCUTS.length && d > DCUTS[b]) b++;
  return b;
}
// fix_view.js (read first in the app) adds a colour mode per correction method; without it (an export) they are left out
const FX = typeof fxInit === 'function';
function modeList() {
  const m = (D && D.modes) || ['mask', 'logprob'];
  return FX ? m : m.filter(x => ['mask', 'logprob', 'delta'].includes(x));
}
function visible(s) {
  return s.replace(/ /g, '␣').replace(/\n/g, '↵').replace(/\t/g, '→').replace(/\r/g, '␍')
    .replace(/[\u0000-\u001f\u007f\u200b-\u200f\u202a-\u202e\u2060-\u2064\ufeff]/g,
      c => '\\u' + c.charCodeAt(0).toString(16).padStart(4, '0'));
}
function el(tag, cls, text) {
  const e = document.createElement(tag);
  if (cls) e.className = cls;
  if (text !== undefined) e.textContent = text;
  return e;
}
function startIndex() { return showAll ? 0 : Math.max(0, D.prompt_len - D.tail); }
function pages() { return Math.max(1, Math.ceil((D.ids.length - startIndex()) / D.page)); }
function kindName(k) {
  return k === KIND.CONTEXT ? 'context (mask 0)' : k === KIND.TRAINED ? 'output · trained (mask 1)'
    : 'output · not trained (mask 0)';
}

function drawBar() {
  const frag = document.createDocumentFragment();
  const modes = el('span', 'ri-modes');
  for (const m of modeList()) {
    const b = el('button', 'ri-btn' + (mode === m ? ' on' : ''), m);
    b.dataset.mode = m;
    b.onclick = () => { mode = m; followUrl(); drawBar(); draw(); };
    modes.appendChild(b);
  }
  frag.appendChild(modes);
  const legend = el('span', 'ri-legend');
  if (mode === 'mask') {
    legend.append(el('span', 'tk k' + KIND.CONTEXT, 'context'), el('span', 'tk k' + KIND.TRAINED, 'trained'),
                  el('span', 'tk k' + KIND.UNTRAINED, 'output, no gradient'), el('span', 'tk sp', 'special'));
  } else if (mode === 'delta') {
    legend.append(el('span', 'ri-lg-t', `Δ = trainer − sampler (${D.delta.model})`));
    DCUT_LABELS.forEach((l, i) => legend.appendChild(el('span', 'tk d' + i, l)));
    legend.appendChild(el('span', 'tk dx', 'context changed'));
    const is = D.delta.is;  // TRL's IS correction under the panel's mode and bounds (render/delta.py)
    if (is) {
      legend.append(el('span', 'tk isc', `clipped (${is.mode})`), el('span', 'tk isz', `zeroed (${is.mode})`));
      if (is.seq) legend.appendChild(el('span', 'ri-is-seq', `whole row ${is.seq[0]} by ${is.mode}: sequence ratio ${is.seq[1]}`));
    }
  } else if (FX && fx && FIX_MODES.includes(mode)) {
    fxLegend(legend);  // the method's states, its sliders and counts (fix_view.js)
  } else {
    legend.append(el('span', 'ri-lg-t', 'logprob'));
    CUT_LABELS.forEach((l, i) => legend.appendChild(el('span', 'tk b' + i, l)));
  }
  frag.appendChild(legend);
  const info = el('span', 'ri-tv-info');
  const p = D.prompt_len, o = D.ids.length - p;
  info.textContent = `turn ${D.turn} · ${p.toLocaleString()} prompt + ${o.toLocaleString()} output tokens · ` +
    `${D.trained ? 'trained' : (D.kind === 'agent' ? 'NOT trained' : 'bookkeeping, filtered')} · ids: ${D.output_source}` +
    (p ? ` / prompt: ${D.prompt_source}` : '') + (D.exact ? '' : ' · no tokenizer: ids, with text only where the file records it');
  info.title = root.dataset.glossIds || '';  // the terms explained on hover (viewer/render/glossary.py)
  legend.title = root.dataset[mode === 'mask' ? 'glossMask' : mode === 'delta' ? 'glossDelta' : ''] || '';
  if (mode === 'delta' && D.delta.is) legend.title += '\n' + (root.dataset.glossIs || '');
  frag.appendChild(info);
  if (D.note) frag.appendChild(el('span', 'ri-tv-note', D.note));
  if (D.prompt_len > D.tail) {
    const b = el('button', 'ri-btn ri-ctx', showAll ? 'collapse context' : `show all context (+${(D.prompt_len - D.tail).toLocaleString()})`);
    b.onclick = () => { showAll = !showAll; page = 0; drawBar(); draw(); };
    frag.appendChild(b);
  }
  if (D.link) {
    const b = el('button', 'ri-btn ri-link', 'copy link');
    b.title = 'Link to this turn (and the selected tokens)';
    b.onclick = () => {
      const q = D.link + (sel[0] >= 0 ? `&tok=${sel[0]}-${sel[1]}` : '') + (mode !== 'mask' ? `&mode=${mode}` : '') +
        (document.body.classList.contains('ri-present') ? '&present=1' : '');
      const url = location.origin + location.pathname + '?' + q;
      root.dataset.link = url;
      detail.textContent = 'link: ' + url;
      // Feedback where the user clicked: the button itself says whether the link is on the clipboard.
      const said = t => { b.textContent = t; b.classList.add('ri-said'); clearTimeout(b._t);
                          b._t = setTimeout(() => { b.textContent = 'copy link'; b.classList.remove('ri-said'); }, 2500); };
      if (navigator.clipboard && window.isSecureContext) {
        navigator.clipboard.writeText(url).then(() => said('Copied ✓'), () => said('Not copied: link below'));
      } else said('Link below');
    };
    frag.appendChild(b);
  }
  if (myId === 'token-view') {  // hidden while presenting (app.css)
    // Presenter mode (viewer/ui/assets/presenter.js listens): the same view, large, for a room.
    const b = el('button', 'ri-btn ri-present-btn', 'Present ▸');
    b.title = 'Presenter mode: large type, ← → turns, j k tokens, m colour, d drift, Esc leaves';
    b.onclick = () => window.dispatchEvent(new CustomEvent('ri-present'));
    frag.appendChild(b);
  }
  if (pages() > 1) {
    const pg = el('span', 'ri-pager');
    const prev = el('button', 'ri-btn', '‹'); prev.disabled = page === 0;
    prev.onclick = () => { page--; drawBar(); draw(); };
    const next = el('button', 'ri-btn', '›'); next.disabled = page >= pages() - 1;
    next.onclick = () => { page++; drawBar(); draw(); };
    pg.append(prev, el('span', 'ri-pg', `page ${page + 1} / ${pages()}`), next);
    frag.appendChild(pg);
  }
  bar.replaceChildren(frag);
}

// Painting 50k <span>s up front costs ~10x a plain <pre> of the same text. So a page is
// painted as chunks of plain runs (one text node per run of equal kind: as cheap as
// <pre>), and a chunk is "hydrated" into per-token spans (boundaries, hover, logprob
// colours) when it comes near the viewport. Layout is identical in both states.
// Chunks are grouped into block sections of >= SECTION tokens that end right after a token
// ending in a newline (so a section break is a line break the text has anyway: nothing moves),
// and each section is content-visibility: auto: the browser lays out only the sections near
// the viewport (laying out every line was most of the view's cost, bench/bench_token_view.py).
const CHUNK = 500, SECTION = 2000, LINE_CHARS = 120;
let observer = null;

function tokenSpan(i, lpMode) {
  const s = document.createElement('span');
  let cls = 'tk k' + D.k[i];
  if (spSet.has(i)) cls += ' sp';
  if (lpMode === 'logprob' && D.k[i] !== KIND.CONTEXT) cls += ' b' + bucket(D.lp[i]);
  if (lpMode === 'delta' && D.delta.dl[i] !== null) cls += ' d' + dbucket(D.delta.dl[i]) + (D.delta.ctx === 'changed' ? ' dx' : '');
  if (lpMode === 'delta' && D.delta.is && D.delta.is.m[i]) cls += ' is' + D.delta.is.m[i];
  if (FX && fx) cls += fxClass(i, lpMode);
  if (oovSet.has(i)) cls += ' oov';
  if (markSet.has(i)) cls += ' dr';
  if (noteSet.has(i)) cls += ' nt';
  if (i >= sel[0] && i <= sel[1]) cls += ' sel';
  s.className = cls;
  s.textContent = shown(i);
  s._i = i;
  return s;
}

function shown(i) {
  let x = D.t[i];
  if (x.indexOf('\n') >= 0) x = x.replace(/\n/g, '↵\n');
  return x === '' ? '∅' : x;
}

let hasEmpty = false;  // a token with empty text (shown as ∅) in this payload
function runText(i, j) {
  // shown(i) + ... + shown(j - 1), built as one string (a run is many tokens of one kind).
  let x = D.tx.slice(D.off[i], D.off[j]);  // the texts are one string (token_payload.js)
  if (x.indexOf('\n') >= 0) x = x.replace(/\n/g, '↵\n');
  if (hasEmpty) for (let e = i; e < j; e++) if (D.t[e] === '') return D.t.slice(i, j).map((_, n) => shown(i + n)).join('');
  return x;
}
function plainChunk(a, b) {
  const c = el('span', 'ri-chunk');
  c._a = a; c._b = b;
  let i = a;
  const k = D.k, p = D.prompt_len;
  while (i < b) {
    const ki = k[i], sp = spSet.has(i);
    let j = i + 1;
    // Runs break at a kind change, a special token and the prompt/output boundary.
    while (j < b && k[j] === ki && j !== p && spSet.has(j) === sp) j++;
    c.appendChild(el('span', 'run k' + ki + (sp ? ' sp' : ''), runText(i, j)));
    i = j;
  }
  return c;
}

function hydrate(c) {
  if (!c || c._hydrated) return;
  c._hydrated = true;
  const lpMode = mode;
  const frag = document.createDocumentFragment();
  for (let i = c._a; i < c._b; i++) frag.appendChild(tokenSpan(i, lpMode));
  c.replaceChildren(frag);
  if (observer) observer.unobserve(c);
  root.dataset.hydrated = String(Number(root.dataset.hydrated || 0) + (c._b - c._a));
}

function hydrateVisible() {
  // Chunks on screen now become token spans at once (the observer would do it a frame
  // later), so a redraw (mode, page, context) never shows a moment without hover. Sections
  // first: asking a skipped section's chunks where they are would lay the section out.
  const r = body.getBoundingClientRect();
  const on = x => { const b = x.getBoundingClientRect(); return b.bottom >= r.top && b.top <= r.bottom; };
  for (const sec of body.querySelectorAll('.ri-sec')) {
    if (!on(sec)) continue;
    for (const c of sec.querySelectorAll('.ri-chunk')) if (on(c)) hydrate(c);
  }
}

function chunkOf(i) {
  for (const c of body.querySelectorAll('.ri-chunk')) if (i >= c._a && i < c._b) return c;
  return null;
}

function endsLine(i) { const x = D.t[i]; return x.length > 0 && x.charCodeAt(x.length - 1) === 10; }

function draw(near) {
  // near: token positions whose chunks are hydrated before the DOM is touched (no layout
  // needed); without it, whatever is on screen after the redraw is hydrated.
  const start = startIndex();
  const a = start + page * D.page, b = Math.min(D.ids.length, a + D.page);
  root.dataset.hydrated = '0';
  if (observer) observer.disconnect();
  observer = new IntersectionObserver(es => es.forEach(e => { if (e.isIntersecting) hydrate(e.target); }),
                                      {root: body, rootMargin: '800px 0px'});
  const frag = document.createDocumentFragment();
  let sec = null, secTokens = 0, secLines = 0;
  const open = () => { sec = el('div', 'ri-sec'); frag.appendChild(sec); secTokens = 0; secLines = 0; };
  let lineLen = 0;  // characters on the section's last line so far
  const close = () => {
    secLines += Math.ceil(lineLen / LINE_CHARS); lineLen = 0;
    // Size of a section not laid out yet: its lines, estimated (the browser keeps the real one
    // once it has drawn it: 'auto'); only the scrollbar's length depends on the guess.
    sec.style.setProperty('contain-intrinsic-block-size', `auto ${(secLines * 1.6).toFixed(1)}em`);
  };
  open();
  if (a > 0 && page === 0) sec.appendChild(el('span', 'ri-gap', `… ${a.toLocaleString()} earlier context tokens collapsed …\n`));
  const chunks = [];
  for (let c = a; c < b;) {
    // Chunks never straddle the prompt/output boundary, so the marker sits between two.
    let end = Math.min(b, c + CHUNK);
    if (c < D.prompt_len && end > D.prompt_len) end = D.prompt_len;
    let breakAfter = false;
    if (secTokens + (end - c) >= SECTION) {
      // Due for a section break: end this chunk right after a token that ends a line.
      for (let j = Math.max(c, c + SECTION - secTokens - 1); j < end; j++) if (endsLine(j)) { end = j + 1; breakAfter = true; break; }
    }
    if (c === D.prompt_len && c > a) sec.appendChild(el('span', 'ri-boundary', D.trained ? '▶ output' : '▶ output (not trained)'));
    const ch = plainChunk(c, end);
    if (near && near.some(i => i >= c && i < end)) hydrate(ch);
    chunks.push(ch);
    sec.appendChild(ch);
    for (let i = c; i < end; i++) {  // the section's lines, for its estimated height
      const x = D.t[i];
      if (x.indexOf('\n') < 0) { lineLen += x.length; continue; }
      const parts = x.split('\n');
      for (let n = 0; n < parts.length - 1; n++) { secLines += Math.max(1, Math.ceil((lineLen + parts[n].length) / LINE_CHARS)); lineLen = 0; }
      lineLen = parts[parts.length - 1].length;
    }
    secTokens += end - c;
    c = end;
    if (breakAfter && c < b) { close(); open(); }
  }
  if (b < D.ids.length) sec.appendChild(el('span', 'ri-gap', `\n… ${(D.ids.length - b).toLocaleString()} more tokens on the next page …`));
  close();
  body.replaceChildren(frag);
  chunks.forEach(c => observer.observe(c));
  if (!near) hydrateVisible();
  body.classList.toggle('untrained', !D.trained);
  root.dataset.painted = String(b - a);
  root.dataset.turn = String(D.turn);
}

function describe(i) {
  const lines = [];
  const p = D.prompt_len;
  const where = i < p ? `prompt ${i}` : `output ${i - p}`;
  lines.push(`pos ${i} (${where}) · id ${D.ids[i]}${spSet.has(i) ? ' · special token' : ''}${oovSet.has(i) ? ' · NOT IN VOCAB' : ''}`);
  lines.push(`text "${visible(D.t[i])}"`);
  const lp = D.lp[i];
  if (lp !== null && lp !== undefined) lines.push(`logprob ${lp.toFixed(4)} · p ${Math.exp(lp).toFixed(4)}`);
  else if (i >= p) lines.push('logprob not recorded');
  lines.push(`mask: ${kindName(D.k[i])}`);
  if (markSet.has(i)) lines.push(`drift: ${markSet.get(i)}`);
  if (noteSet.has(i)) lines.push(`note: ${noteSet.get(i)}`);
  if (D.delta && i >= p) {
    const tr = D.delta.tr[i], dl = D.delta.dl[i];
    if (tr === null) lines.push('trainer: not a trained token of the trainer rows (no Δ)');
    else {
      lines.push(`sampler ${lp === null || lp === undefined ? '—' : lp.toFixed(4)} · trainer ${tr.toFixed(4)}`);
      if (dl !== null) lines.push(`Δ ${dl >= 0 ? '+' : ''}${dl.toFixed(4)} · ratio ${Math.exp(dl).toFixed(4)}` +
                                  (Math.abs(dl) > D.delta.thr ? ` · FLAGGED (|Δ| > ${D.delta.thr})` : ''));
      const ex = D.delta.ex ? D.delta.ex[i] : null;  // the sampler's settings' expected Δ (docs/MISMATCH.md)
      if (ex !== null && ex !== undefined && dl !== null) lines.push(`expected by the sampler's settings ${ex >= 0 ? '+' : ''}${ex.toFixed(4)} · residual ${dl - ex >= 0 ? '+' : ''}${(dl - ex).toFixed(4)}`);
      const is = D.delta.is;
      if (is && is.r[i] !== null) lines.push(`IS ${is.mode} [${is.min ?? 'none'}, ${is.max ?? 'none'}]: ratio ${is.r[i]}` +
                                             (is.m[i] === 'z' ? ' · ZEROED' : is.m[i] === 'c' ? ' · CLIPPED' : ''));
      const v = D.delta.verdict ? ` (row ${D.delta.row}, ${D.delta.verdict})` : '';
      lines.push(D.delta.ctx === 'changed' ? `context: CHANGED by the trainer${v}, first differs at prompt ${D.delta.ctx_at}: drift, not numerics` :
                 D.delta.ctx === 'same' ? `context: the sampler's own ids${v}: numeric Δ` : `context: unknown (no engine prompt ids)${v}`);
    }
  }
  if (FX) fxDescribe(i, lines);  // each correction method's verdict on it
  const top = D.top[String(i)];
  if (top) {
    lines.push('top alternatives:');
    top.forEach(([id, l]) => {
      const txt = D.alt[String(id)];
      lines.push(`  ${id === D.ids[i] ? '●' : '○'} ${id}  "${txt === undefined ? '?' : visible(txt)}"  ${l === null ? '' : l.toFixed(3)}`);
    });
  }
  return lines.join('\n');
}

function select(a, b, scroll) {
  sel = [a, b];
  hydrate(chunkOf(a));
  body.querySelectorAll('.tk.sel').forEach(s => s.classList.remove('sel'));
  let target = null;
  for (const s of body.querySelectorAll('.tk')) {
    if (s._i >= a && s._i <= b) { s.classList.add('sel'); if (!target) target = s; }
  }
  detail.textContent = a === b ? describe(a) : `tokens ${a}–${b} selected (${b - a + 1})\n` + describe(a);
  root.dataset.selected = `${a}-${b}`;
  if (scroll && target) target.scrollIntoView({block: 'center'});
}

function reveal(i) {
  // Make absolute position i visible: expand the context if needed and turn to its page.
  if (i < startIndex()) showAll = true;
  page = Math.floor((i - startIndex()) / D.page);
  drawBar(); draw();
}

body.addEventListener('mouseover', e => {
  const s = e.target;
  if (!D || s._i === undefined) return;
  const r = root.getBoundingClientRect();  // read before the tip changes: no layout forced here
  tip.textContent = describe(s._i);
  tip.hidden = false;
  const x = Math.min(e.clientX - r.left + 14, r.width - 320);
  tip.style.left = Math.max(0, x) + 'px';
  // Below the pointer, or above it when the window's bottom would cut the tip off (issue 41, point 7):
  // its height is read once it holds the text (one layout per hover).
  const h = tip.offsetHeight;
  const up = e.clientY + 18 + h > window.innerHeight && e.clientY - 10 - h >= 0;
  tip.style.top = (up ? e.clientY - r.top - 10 - h : e.clientY - r.top + 18) + 'px';
  tip.dataset.side = up ? 'above' : 'below';
  root.dataset.hover = String(s._i);
});
body.addEventListener('mouseleave', () => { tip.hidden = true; });
body.addEventListener('click', e => {
  const s = e.target;
  if (!D || s._i === undefined) return;
  if (e.shiftKey && sel[0] >= 0) select(Math.min(sel[0], s._i), Math.max(sel[0], s._i), false);
  else select(s._i, s._i, false);
});
window.addEventListener('ri-select-token', e => {
  if (!D || !forMe(e)) return;
  // detail: an absolute position, {pos: i} (the presenter's cursor), or {output: k} (k-th output
  // token; the plot sends this); {target: id} limits it to one view.
  const o = (e.detail && typeof e.detail === 'object') ? e.detail : null;
  const i = o ? (o.pos !== undefined ? Number(o.pos) : D.prompt_len + Number(o.output)) : Number(e.detail);
  if (!Number.isInteger(i) || i < 0 || i >= D.ids.length) return;
  reveal(i); select(i, i, true);
});

function layerSet(m) {
  const set = new Map();
  if (!D || m.turn !== D.turn) return set;
  for (const [a, b, label] of m.list) for (let i = a; i < b && i < D.ids.length; i++) set.set(i, label);
  return set;
}
function indexMarks() { markSet = layerSet(marks); noteSet = layerSet(noteMarks); }
window.addEventListener('ri-marks', e => {
  if (!forMe(e)) return;
  const got = {turn: e.detail.turn, list: e.detail.marks || []};
  if (e.detail.layer === 'notes') noteMarks = got; else marks = got;
  indexMarks();
  if (!D) return;
  // Marked tokens must be spans to show: hydrate their chunks, then mark what is painted.
  for (const [a, b] of got.list) { hydrate(chunkOf(a)); hydrate(chunkOf(b - 1)); }
  body.querySelectorAll('.tk').forEach(s => { s.classList.toggle('dr', markSet.has(s._i)); s.classList.toggle('nt', noteSet.has(s._i)); });
  root.dataset.marks = String(markSet.size);
  root.dataset.notes = String(noteSet.size);
});

// The main view marks its turn in the turn list (Gradio draws the list's rows itself, and again
// as it scrolls: an observer re-marks them).
let listObs = null;
function markTurnList() {
  if (myId !== 'token-view') return;
  const list = document.querySelector('#turn-list');
  if (!list) return;
  if (!listObs) {
    listObs = new MutationObserver(markTurnList);
    listObs.observe(list, {childList: true, subtree: true, characterData: true});
  }
  list.querySelectorAll('.virtual-row').forEach(r => {
    const c = r.querySelector('.first-column');
    const on = !!D && !!c && c.textContent.trim() === String(D.turn);
    if (r.classList.contains('ri-current') !== on) r.classList.toggle('ri-current', on);
  });
}

let loaded = null;  // the payload string now drawn
function load() {
  // The same payload again (a two-step answer re-sends the token view with the plots): keep
  // what is drawn, the cursor and the selection, instead of repainting under the user.
  if (props.value && props.value === loaded && D) return;
  loaded = props.value;
  if (!props.value) { D = null; bar.replaceChildren(); body.replaceChildren(el('span', 'ri-empty', 'No turn selected.')); return; }
  const was = mode;
  try { D = riExpandTokens(JSON.parse(props.value)); } catch (err) { body.textContent = 'Could not read token data: ' + err; return; }
  if (FX) fxInit();
  // The colour mode stays what the user picked while turns change (a turn's payload carries the
  // default, mask); a payload asking for another (a ?mode= link, a finished rescore's delta) sets it.
  mode = D.mode !== 'mask' || !modeList().includes(was) ? D.mode : was;
  followUrl();
  showAll = false; page = 0; sel = [-1, -1]; detail.textContent = '';
  spSet = new Set(D.sp); oovSet = new Set(D.oov); indexMarks(); hasEmpty = D.tl.includes(0);
  root.dataset.n = String(D.ids.length); root.dataset.prompt = String(D.prompt_len); delete root.dataset.selected;
  root.dataset.marks = String(markSet.size); root.dataset.notes = String(noteSet.size);
  markTurnList();
  if (D.focus) { reveal(D.focus[0]); select(D.focus[0], D.focus[1], true); return; }
  // Open on the answer: the chunks around the prompt/output boundary are hydrated while
  // still detached, then one layout places the boundary near the top.
  const p = D.prompt_len;
  drawBar(); draw(p > 0 ? [p - 1, p] : [startIndex()]);
  const mark = body.querySelector('.ri-boundary');
  if (mark) body.scrollTop = Math.max(0, mark.offsetTop - body.offsetTop - 80);
}
load();
watch('value', load);
