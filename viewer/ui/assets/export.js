// The offline export's page (viewer/render/export.py): walks the file's steps (a rollout's turns, or
// a deck's steps) with the app's own token view and presenter, run by a small Gradio-like host.
// Data comes only from <script type="application/json"> tags (textContent) and reaches the DOM
// only through textContent / className, as in the app. Nothing is fetched.
(function () {
  'use strict';
  const $ = (s, r) => (r || document).querySelector(s);
  const $$ = (s, r) => Array.from((r || document).querySelectorAll(s));
  const text = id => { const e = document.getElementById(id); return e ? e.textContent : ''; };
  const DOC = JSON.parse(text('ri-x-doc'));
  const VIEW = 'token-view';

  // Gradio runs a js_on_load body as fn(element, trigger, props, server, upload, watch); so do we.
  function mount(fn, element, trigger) {
    const watchers = [];
    const props = {value: ''};
    fn(element, trigger || (() => {}), props, {}, () => Promise.reject(new Error('no upload in an export')),
       (names, cb) => watchers.push(cb));
    return v => { props.value = v; for (const cb of watchers) { try { cb(); } catch (e) { console.error(e); } } };
  }
  const tvBox = document.getElementById(VIEW);
  const setTokens = mount(riTokenView, tvBox);
  const setPresenter = mount(riPresenter, document.getElementById('presenter'));
  const tvRoot = () => $('.ri-tv', tvBox);

  let cur = -1, driftOn = false, noteAt = -1, D = null, plotCursor = null;
  const steps = DOC.steps;

  // Every usable note of the file, in step order: [rollout key, note]; flagged notes stay listed, unvisited.
  const notes = [];
  for (const [r, ro] of Object.entries(DOC.rollouts)) {
    for (const n of ro.notes) if (!n.problem && ro.turns[String(n.turn)]) notes.push([r, n]);
  }

  function modeButton(m) { return $(`#${VIEW} .ri-modes button[data-mode="${m}"]`); }

  function show(i, focus, callout) {
    if (i < 0 || i >= steps.length) return;
    const s = steps[i], first = cur === -1;
    cur = i;
    $$('.ri-x-head, .ri-x-turns, .ri-x-notes').forEach(e => { e.hidden = e.dataset.rollout !== s.r; });
    $$('.ri-x-conv, .ri-x-static').forEach(e => { e.hidden = true; });
    $$('.ri-x-turns tr').forEach(tr => tr.classList.toggle('ri-current',
      s.kind === 'tokens' && tr.closest('.ri-x-turns').dataset.rollout === s.r && tr.dataset.turn === String(s.turn)));
    const isTokens = s.kind === 'tokens';
    tvBox.hidden = !isTokens;
    $('#ri-x-plot').hidden = !isTokens;
    if (isTokens) {
      const t = DOC.rollouts[s.r].turns[String(s.turn)];
      D = JSON.parse(text(t.p));
      const want = s.mode === 'drift' ? 'mask' : s.mode;
      D.focus = focus || s.focus || null;
      D.mode = want;
      setTokens(JSON.stringify(D));
      riExpandTokens(D);  // the plot reads D.lp and D.t (token_payload.js); the view got the compact form
      // A deck step names its colour mode; walking a rollout keeps the one the viewer picked.
      if (DOC.deck || first) { const b = modeButton(want); if (b && !b.classList.contains('on')) b.click(); }
      // drift mode = mask colours with the drift marks on: a deck step says so per step, a rollout once
      if (DOC.deck) driftOn = s.mode === 'drift'; else if (first && s.mode === 'drift') driftOn = true;
      setPresenter(text(t.m));
      applyDrift();
      const c = document.getElementById(t.c);
      if (c) c.hidden = false;
      drawPlot();
      markNotes();
    } else {
      setPresenter('');
      const sec = document.getElementById(s.sec);
      if (sec) sec.hidden = false;
    }
    const where = DOC.deck ? `step ${i + 1} / ${steps.length}` : `turn ${s.turn} (${i + 1} of ${steps.length} in this file)`;
    $('#ri-x-where').textContent = where + (s.kind !== 'tokens' ? ` · ${s.kind}` : '') +
      (DOC.deck ? ` · ${DOC.rollouts[s.r].name}` : '');
    const box = $('#ri-x-callout');
    const say = callout || (s.title || s.note ? [s.title, s.note] : null);
    box.replaceChildren();
    if (say) {
      if (say[0]) { const b = document.createElement('b'); b.textContent = say[0]; box.appendChild(b); }
      box.appendChild(document.createTextNode(say[1] || ''));
    }
    box.hidden = !say;
    document.body.dataset.step = String(i);
  }

  let ownKey = false;  // a 'd' this page sends presenter.js, not the viewer's
  function applyDrift() {
    const r = tvRoot();
    if (document.body.classList.contains('ri-present')) {
      // While presenting, presenter.js owns the marks (its d key): ask it, by that key, for the state wanted.
      const on = /drift: on/.test($('.ri-pr-state').textContent);
      if (on !== driftOn) {
        ownKey = true;
        document.dispatchEvent(new KeyboardEvent('keydown', {key: 'd', bubbles: true}));
        ownKey = false;
      }
    } else if (r && driftOn) r.classList.add('show-drift');
    $('#ri-x-drift').classList.toggle('on', driftOn);
  }

  // --- notes: marks under their tokens, n / N walk them (a callout says the text) ------------------
  function noteRanges() {
    const s = steps[cur];
    if (!s || s.kind !== 'tokens') return [];
    return DOC.rollouts[s.r].notes.filter(n => !n.problem && n.turn === s.turn).map(n => n.tok);
  }
  function markNotes() {
    const rs = noteRanges();
    $$(`#${VIEW} .tk`).forEach(e => e.classList.toggle('ri-x-nm', rs.some(([a, b]) => e._i >= a && e._i <= b)));
    const r = tvRoot();
    if (r) r.dataset.notes = String(rs.length);
  }
  // The token view paints lazily (chunks become spans near the viewport): mark what it adds.
  new MutationObserver(muts => {
    const rs = noteRanges();
    if (!rs.length) return;
    for (const m of muts) for (const n of m.addedNodes) {
      if (n.nodeType !== 1) continue;
      const spans = n.classList.contains('tk') ? [n] : n.querySelectorAll('.tk');
      for (const e of spans) if (rs.some(([a, b]) => e._i >= a && e._i <= b)) e.classList.add('ri-x-nm');
    }
  }).observe($('.ri-tv-body', tvBox), {childList: true, subtree: true});

  function goNote(k) {
    if (!notes.length) return;
    noteAt = (k + notes.length) % notes.length;
    const [r, n] = notes[noteAt];
    const i = steps.findIndex(s => s.kind === 'tokens' && s.r === r && s.turn === n.turn);
    if (i < 0) return;
    show(i, n.tok, [`note ${noteAt + 1} / ${notes.length}`, n.text]);
    $$('.ri-x-notes li').forEach(li => li.classList.toggle('on', li.dataset.note === n.id &&
                                                            li.closest('.ri-x-notes').dataset.rollout === r));
    document.body.dataset.note = n.id;
  }

  // --- the logprob plot: a small SVG of the output tokens' logprobs; a click selects the token -----
  const SVG = 'http://www.w3.org/2000/svg';
  function svgEl(tag, attrs) {
    const e = document.createElementNS(SVG, tag);
    for (const [k, v] of Object.entries(attrs || {})) e.setAttribute(k, String(v));
    return e;
  }
  function drawPlot() {
    const box = $('#ri-x-plot');
    plotCursor = null;
    const p = D.prompt_len, lp = D.lp.slice(p), n = lp.length;
    const vals = lp.filter(v => v !== null && v !== undefined);
    if (!n || !vals.length) { box.replaceChildren(); return; }
    let mn = D.low;
    for (const v of vals) if (v < mn) mn = v;
    const W = 1000, H = 170, lo = mn - 0.5, hi = 0.2;
    const x = k => (n === 1 ? W / 2 : 40 + (k / (n - 1)) * (W - 50));
    const y = v => 10 + (hi - v) / (hi - lo) * (H - 30);
    const svg = svgEl('svg', {viewBox: `0 0 ${W} ${H}`, preserveAspectRatio: 'none', role: 'img'});
    let d = '', pen = false;
    for (let k = 0; k < n; k++) {
      const v = lp[k];
      if (v === null || v === undefined) { pen = false; continue; }
      d += (pen ? 'L' : 'M') + x(k).toFixed(1) + ' ' + y(v).toFixed(1);
      pen = true;
    }
    svg.appendChild(svgEl('line', {x1: 40, x2: W - 10, y1: y(D.low), y2: y(D.low), class: 'ri-x-low'}));
    svg.appendChild(svgEl('path', {d, class: 'ri-x-line'}));
    const label = (t, yy) => { const e = svgEl('text', {x: 2, y: yy}); e.textContent = t; svg.appendChild(e); };
    label('0', y(0) + 4); label(lo.toFixed(0), y(lo)); label(`low ${D.low}`, y(D.low) - 3);
    const tip = svgEl('text', {x: 48, y: 14});
    svg.appendChild(tip);
    plotCursor = svgEl('line', {x1: -10, x2: -10, y1: 0, y2: H, class: 'ri-x-cur'});
    svg.appendChild(plotCursor);
    const at = e => {
      const r = svg.getBoundingClientRect();
      const fx = (e.clientX - r.left) / r.width * W;
      return Math.max(0, Math.min(n - 1, Math.round((fx - 40) / (W - 50) * (n - 1))));
    };
    svg.addEventListener('mousemove', e => {
      const k = at(e), v = lp[k];
      tip.textContent = `output ${k} · ${JSON.stringify(D.t[p + k])} · logprob ${v === null ? '—' : v.toFixed(3)}`;
    });
    svg.addEventListener('click', e => {
      const k = at(e);
      plotCursor.setAttribute('x1', x(k)); plotCursor.setAttribute('x2', x(k));
      window.dispatchEvent(new CustomEvent('ri-select-token', {detail: {target: VIEW, output: k}}));
    });
    svg.dataset.points = String(vals.length);
    box.replaceChildren(svg);
  }

  // --- wiring -----------------------------------------------------------------------------------
  $('#prev-turn').addEventListener('click', () => show(cur - 1));
  $('#next-turn').addEventListener('click', () => show(cur + 1));
  $('#ri-x-drift').addEventListener('click', () => {
    driftOn = !driftOn;
    const r = tvRoot();
    if (r) r.classList.toggle('show-drift', driftOn);
    applyDrift();
  });
  $('#ri-x-theme').addEventListener('click', () => document.body.classList.toggle('dark'));
  $$('.ri-x-turns tr.ri-x-go').forEach(tr => tr.addEventListener('click', () => show(Number(tr.dataset.step))));
  $$('.ri-x-notes li').forEach(li => li.addEventListener('click', () => {
    const r = li.closest('.ri-x-notes').dataset.rollout;
    const k = notes.findIndex(([rr, n]) => rr === r && n.id === li.dataset.note);
    if (k >= 0) goNote(k);
  }));
  document.addEventListener('keydown', e => {
    if (e.ctrlKey || e.metaKey || e.altKey) return;
    const t = e.target;
    if (t && (t.tagName === 'INPUT' || t.tagName === 'TEXTAREA' || t.isContentEditable)) return;
    if (e.key === 'd') { if (!ownKey && document.body.classList.contains('ri-present')) driftOn = !driftOn; return; }
    if (e.key === 'n') goNote(noteAt + 1);
    else if (e.key === 'N') goNote(noteAt - 1);
    else return;
    e.preventDefault();
  });
  show(Math.max(0, Math.min(steps.length - 1, DOC.start || 0)));
  if (DOC.present && !document.body.classList.contains('ri-present')) window.dispatchEvent(new CustomEvent('ri-present'));
  document.body.dataset.ready = '1';
})();
