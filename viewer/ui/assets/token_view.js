// Token view: draws one turn's tokens from a JSON string (props.value) built by
// viewer/render.py::token_view_payload. Safe by construction: data only ever reaches
// the DOM through textContent / className, never innerHTML. One delegated hover
// handler reads the side arrays, so per-token markup is a bare <span class>.
const root = element.querySelector('.ri-tv');
const bar = root.querySelector('.ri-tv-bar');
const body = root.querySelector('.ri-tv-body');
const tip = root.querySelector('.ri-tip');
const detail = root.querySelector('.ri-tv-detail');
// Logprob buckets (upper-exclusive thresholds, descending): b0 is "confident".
const CUTS = [-0.1, -0.5, -1, -2, -3, -5, -8];
const CUT_LABELS = ['≥ -0.1', '-0.5', '-1', '-2', '-3', '-5', '-8', '< -8'];
let D = null, mode = 'mask', page = 0, showAll = false, sel = [-1, -1], first = 0;
let spSet = new Set(), oovSet = new Set();

function bucket(lp) {
  if (lp === null || lp === undefined) return -1;
  let b = 0;
  while (b < CUTS.length && lp < CUTS[b]) b++;
  return b;
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
function kindName(k) { return k === 0 ? 'context (mask 0)' : k === 1 ? 'output · trained (mask 1)' : 'output · not trained (mask 0)'; }

function drawBar() {
  const frag = document.createDocumentFragment();
  const modes = el('span', 'ri-modes');
  for (const m of ['mask', 'logprob']) {
    const b = el('button', 'ri-btn' + (mode === m ? ' on' : ''), m);
    b.dataset.mode = m;
    b.onclick = () => { mode = m; drawBar(); draw(); };
    modes.appendChild(b);
  }
  frag.appendChild(modes);
  const legend = el('span', 'ri-legend');
  if (mode === 'mask') {
    legend.append(el('span', 'tk k0', 'context'), el('span', 'tk k1', 'trained'),
                  el('span', 'tk k2', 'output, no gradient'), el('span', 'tk sp', 'special'));
  } else {
    legend.append(el('span', 'ri-lg-t', 'logprob'));
    CUT_LABELS.forEach((l, i) => legend.appendChild(el('span', 'tk b' + i, l)));
  }
  frag.appendChild(legend);
  const info = el('span', 'ri-tv-info');
  const p = D.prompt_len, o = D.ids.length - p;
  info.textContent = `turn ${D.turn} · ${p.toLocaleString()} prompt + ${o.toLocaleString()} output tokens · ` +
    `${D.trained ? 'trained' : (D.kind === 'agent' ? 'NOT trained' : 'bookkeeping, filtered')} · ids: ${D.output_source}` +
    (p ? ` / prompt: ${D.prompt_source}` : '') + (D.exact ? '' : ' · text from recorded bytes (no tokenizer)');
  frag.appendChild(info);
  if (D.prompt_len > D.tail) {
    const b = el('button', 'ri-btn ri-ctx', showAll ? 'collapse context' : `show all context (+${(D.prompt_len - D.tail).toLocaleString()})`);
    b.onclick = () => { showAll = !showAll; page = 0; drawBar(); draw(); };
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

function draw() {
  const start = startIndex();
  const a = start + page * D.page, b = Math.min(D.ids.length, a + D.page);
  first = a;
  const frag = document.createDocumentFragment();
  if (a > 0 && page === 0) frag.appendChild(el('span', 'ri-gap', `… ${a.toLocaleString()} earlier context tokens collapsed …\n`));
  const lpMode = mode === 'logprob';
  const t = D.t, k = D.k, lp = D.lp;
  for (let i = a; i < b; i++) {
    if (i === D.prompt_len && i > a) frag.appendChild(el('span', 'ri-boundary', D.trained ? '▶ output' : '▶ output (not trained)'));
    const s = document.createElement('span');
    let cls = 'tk k' + k[i];
    if (spSet.has(i)) cls += ' sp';
    if (lpMode && k[i] !== 0) cls += ' b' + bucket(lp[i]);
    if (oovSet.has(i)) cls += ' oov';
    if (i >= sel[0] && i <= sel[1]) cls += ' sel';
    s.className = cls;
    let x = t[i];
    if (x.indexOf('\n') >= 0) x = x.replace(/\n/g, '↵\n');
    s.textContent = x === '' ? '∅' : x;
    s._i = i;
    frag.appendChild(s);
  }
  if (b < D.ids.length) frag.appendChild(el('span', 'ri-gap', `\n… ${(D.ids.length - b).toLocaleString()} more tokens on the next page …`));
  body.replaceChildren(frag);
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
  body.querySelectorAll('.tk.sel').forEach(s => s.classList.remove('sel'));
  let target = null;
  for (const s of body.children) {
    if (s._i !== undefined && s._i >= a && s._i <= b) { s.classList.add('sel'); if (!target) target = s; }
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
  tip.textContent = describe(s._i);
  tip.hidden = false;
  const r = root.getBoundingClientRect();
  const x = Math.min(e.clientX - r.left + 14, r.width - 320);
  tip.style.left = Math.max(0, x) + 'px';
  tip.style.top = (e.clientY - r.top + 18) + 'px';
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
  if (!D) return;
  // detail: an absolute position, or {output: k} (k-th output token; the plot sends this).
  const i = (e.detail && typeof e.detail === 'object') ? D.prompt_len + Number(e.detail.output) : Number(e.detail);
  if (!Number.isInteger(i) || i < 0 || i >= D.ids.length) return;
  reveal(i); select(i, i, true);
});

function load() {
  if (!props.value) { D = null; bar.replaceChildren(); body.replaceChildren(el('span', 'ri-empty', 'No turn selected.')); return; }
  try { D = JSON.parse(props.value); } catch (err) { body.textContent = 'Could not read token data: ' + err; return; }
  mode = D.mode; showAll = false; page = 0; sel = [-1, -1]; detail.textContent = '';
  spSet = new Set(D.sp); oovSet = new Set(D.oov);
  if (D.focus) { reveal(D.focus[0]); select(D.focus[0], D.focus[1], true); return; }
  drawBar(); draw();
  // Open on the answer: scroll so the prompt/output boundary sits near the top.
  const mark = body.querySelector('.ri-boundary');
  if (mark) body.scrollTop = Math.max(0, mark.offsetTop - body.offsetTop - 80);
}
load();
watch('value', load);
