// Presenter mode (?present=1): a rollout shown to a room. Large type, chrome hidden (app.css,
// body.ri-present), dark. Keys: ← → turns (the Tokens tab's own prev/next buttons), j / k a
// token cursor (the token view's 'ri-select-token' event; its detail panel shows the token,
// large), m the next colour mode among the token view's own mode buttons, d drift highlights
// (marks from the server, props.value, handed to the token view), Esc leaves. On a touch screen
// the bar's ◀ ▶ buttons (a tap) and a horizontal swipe change the turn.
// Data only reaches the DOM through textContent.
const bar = element.querySelector('.ri-pr');
const title = bar.querySelector('.ri-pr-title');
const state = bar.querySelector('.ri-pr-state');
const VIEW = 'token-view';
let P = {turn: null, marks: [], note: '', first: false, last: false}, drift = false, cursor = -1, cursorOf = '', wasDark = false;
let wantMode = null;  // the colour mode picked with m, kept across turns

const tv = () => document.querySelector('#' + VIEW + ' .ri-tv');
const presenting = () => document.body.classList.contains('ri-present');

function show() {
  const r = tv();
  const turn = r && r.dataset.turn !== undefined ? r.dataset.turn : '–';
  // the ends are said before ← / → is pressed (the server knows the rollout's turns: props.value)
  const here = P.turn !== null && r && String(P.turn) === r.dataset.turn;
  const end = here && P.first ? ' · first turn' : here && P.last ? ' · last turn' : '';
  title.textContent = `turn ${turn}${end}`;
  title.classList.toggle('ri-pr-end', !!end);
  const modeBtn = document.querySelector('#' + VIEW + ' .ri-modes button.on');
  const parts = [`colour: ${modeBtn ? modeBtn.dataset.mode : '?'}`];
  parts.push(drift ? `drift: on (${driftCount(here)}${P.note ? '; ' + P.note : ''})` : 'drift: off');
  if (cursor >= 0 && r && cursorOf === r.dataset.turn + '|' + r.dataset.n) {
    const p = Number(r.dataset.prompt);
    parts.push(cursor < p ? `prompt ${cursor}` : `output ${cursor - p}`);
  }
  state.textContent = parts.join(' · ');
}

function driftCount(here) {
  // Counted per check, in the Drift tab's words: a round-trip mark is one of its changed spans;
  // the re-render and the prefix audit each mark where they first diverge.
  const by = {};
  if (here) for (const m of P.marks) by[m[3]] = (by[m[3]] || 0) + 1;
  const out = [];
  const n = by.roundtrip || 0;
  out.push(`round trip: ${n} changed span${n === 1 ? '' : 's'}`);
  if (by.template) out.push('re-render: differs');
  if (by.prefix) out.push('prefix: broken');
  return out.join(' · ');
}

function sendMarks() {
  window.dispatchEvent(new CustomEvent('ri-marks', {detail: {target: VIEW, turn: P.turn, marks: P.marks}}));
  const r = tv();
  if (r) r.classList.toggle('show-drift', drift);
}

function fit() {
  // The cursor's details beside the tokens on a wide screen, under them on a narrow one (app.css)
  const wide = window.innerWidth >= 900;
  document.body.classList.toggle('ri-wide', presenting() && wide);
  document.body.classList.toggle('ri-narrow', presenting() && !wide);
  room();
}

// Room on screen (app.css reads both): the tokens' box ends at the window's bottom, wherever the token
// view's bar ends (it wraps with the window's width); the deck / notes callout (talk.js) takes its own
// height out of the right column above the details, so it never covers the tokens or the details.
let calloutSeen = null;
function room() {
  const s = document.body.style;
  if (!presenting()) { s.removeProperty('--ri-tv-top'); s.removeProperty('--ri-callout-h'); return; }
  const b = document.querySelector('#' + VIEW + ' .ri-tv-body');
  if (b) s.setProperty('--ri-tv-top', Math.round(b.getBoundingClientRect().top + window.scrollY) + 'px');
  const c = document.querySelector('#talk .ri-callout');
  if (c && calloutSeen !== c && window.ResizeObserver) { calloutSeen = c; new ResizeObserver(room).observe(c); }
  s.setProperty('--ri-callout-h', (c && !c.hidden ? Math.ceil(c.getBoundingClientRect().height) + 8 : 0) + 'px');
}

// A turn opens on its output, as the Tokens tab does (token_view.js), but placed again once the large
// type is laid out: the offset the view set under the normal type pointed into the system prompt. A
// selection (a deck step's range, a ?tok= link) is centred instead. Sections off screen have estimated
// heights (content-visibility) that change as they come into view: placed again until it holds.
let placedFor = '';
function toOutput(tries) {
  const r = tv();
  if (!presenting() || !r || !r.dataset.n) return;
  // a new turn starts at the page's top (the view's own scrollIntoView of a selection scrolls the page
  // too, which put the token view's bar under the presenter's)
  if (placedFor !== r.dataset.turn + '|' + r.dataset.n) window.scrollTo(0, 0);
  placedFor = r.dataset.turn + '|' + r.dataset.n;
  const body = r.querySelector('.ri-tv-body');
  const at = r.dataset.selected ? body.querySelector('.tk.sel') : body.querySelector('.ri-boundary');
  if (!at) return;
  const top = body.getBoundingClientRect().top, y = at.getBoundingClientRect().top - top;
  const want = r.dataset.selected ? (body.clientHeight - at.offsetHeight) / 2 : 40;
  if (Math.abs(y - want) > 2) body.scrollTop = Math.max(0, body.scrollTop + y - want);
  if (tries > 0 && Math.abs(y - want) > 2) requestAnimationFrame(() => toOutput(tries - 1));
}

function enter(tell) {
  // tell: entered by the Present button, so the server does not know yet (a ?present=1 link it does)
  if (tell) trigger('focus');
  wasDark = document.body.classList.contains('dark');
  document.body.classList.add('ri-present', 'dark');
  bar.hidden = false;
  fit();
  const u = new URL(location.href);  // the address says so too (a reload or a shared link presents)
  if (u.searchParams.get('present') !== '1') { u.searchParams.set('present', '1'); history.replaceState(history.state, '', u.href); }
  show();
  requestAnimationFrame(() => toOutput(20));
}

function leave() {
  trigger('blur');  // the server stops computing drift marks for every turn
  document.body.classList.remove('ri-present', 'ri-wide', 'ri-narrow');
  if (!wasDark) document.body.classList.remove('dark');
  room();
  placedFor = '';
  bar.hidden = true;
  const r = tv();
  if (r) r.classList.remove('show-drift');
  drift = false;
  const u = new URL(location.href);
  u.searchParams.delete('present');
  history.replaceState(history.state, '', u.toString());
}

function move(step) {
  const r = tv();
  if (!r || !r.dataset.n) return;
  const n = Number(r.dataset.n), p = Number(r.dataset.prompt);
  const here = r.dataset.turn + '|' + r.dataset.n;
  if (cursorOf !== here) {  // a new turn: start from its selection, else its first output token
    cursorOf = here;
    const sel = r.dataset.selected ? Number(r.dataset.selected.split('-')[0]) : NaN;
    cursor = Number.isInteger(sel) ? sel - step : (step > 0 ? p - 1 : p);
  }
  cursor = Math.max(0, Math.min(n - 1, cursor + step));
  window.dispatchEvent(new CustomEvent('ri-select-token', {detail: {target: VIEW, pos: cursor}}));
  show();
}

function cycleMode() {
  // The modes are whatever the token view offers (its buttons), e.g. mask, logprob, delta.
  const btns = [...document.querySelectorAll('#' + VIEW + ' .ri-modes button[data-mode]')];
  if (!btns.length) return;
  const i = btns.findIndex(b => b.classList.contains('on'));
  const next = btns[(i + 1) % btns.length];
  wantMode = next.dataset.mode;
  next.click();
  const r = tv();
  if (r) r.classList.toggle('show-drift', drift);
  if (cursor >= 0 && r && cursorOf === r.dataset.turn + '|' + r.dataset.n) {
    window.dispatchEvent(new CustomEvent('ri-select-token', {detail: {target: VIEW, pos: cursor}}));
  }
  show();
}

function click(id) {
  const b = document.getElementById(id);
  if (b) b.click();
}

if (!window.__riPresenterKeys) {
  window.__riPresenterKeys = true;
  // the token view's "Present" button
  window.addEventListener('ri-present', () => { if (!presenting()) enter(true); });
  window.addEventListener('resize', () => { fit(); requestAnimationFrame(() => toOutput(20)); });
  // Touch: a horizontal swipe (longer than 60 px, more sideways than up or down) changes the turn;
  // a vertical one scrolls as usual.
  let touch0 = null;
  document.addEventListener('touchstart', e => {
    touch0 = presenting() && e.touches.length === 1 ? [e.touches[0].clientX, e.touches[0].clientY] : null;
  }, {passive: true});
  document.addEventListener('touchend', e => {
    if (!touch0 || !presenting() || !e.changedTouches.length) return;
    const dx = e.changedTouches[0].clientX - touch0[0], dy = e.changedTouches[0].clientY - touch0[1];
    touch0 = null;
    if (Math.abs(dx) > 60 && Math.abs(dx) > 1.5 * Math.abs(dy)) click(dx < 0 ? 'next-turn' : 'prev-turn');
  }, {passive: true});
  document.addEventListener('keydown', e => {
    if (!presenting() || e.ctrlKey || e.metaKey || e.altKey) return;
    const t = e.target;
    if (t && (t.tagName === 'INPUT' || t.tagName === 'TEXTAREA' || t.tagName === 'SELECT' || t.isContentEditable)) return;
    if (e.key === 'ArrowRight') click('next-turn');
    else if (e.key === 'ArrowLeft') click('prev-turn');
    else if (e.key === 'j') move(+1);
    else if (e.key === 'k') move(-1);
    else if (e.key === 'm') cycleMode();
    else if (e.key === 'd') { drift = !drift; sendMarks(); show(); }
    else if (e.key === 'Escape') leave();
    else return;
    e.preventDefault();
  });
  // The title follows the token view (a new turn arrives after ← / →).
  // A new turn opens in the server's default colour mode: switch back to the one picked with m.
  new MutationObserver(() => {
    if (!presenting()) return;
    const r = tv();
    if (r) r.classList.toggle('show-drift', drift);
    const on = document.querySelector('#' + VIEW + ' .ri-modes button.on');
    const want = wantMode && document.querySelector(`#${VIEW} .ri-modes button[data-mode="${wantMode}"]`);
    if (want && on !== want) want.click();
    room();
    if (r && r.dataset.n && placedFor !== r.dataset.turn + '|' + r.dataset.n) requestAnimationFrame(() => toOutput(20));
    show();
  }).observe(document.body, {subtree: true, attributes: true, attributeFilter: ['data-turn', 'data-selected']});
}

bar.querySelector('.ri-pr-prev').addEventListener('click', () => click('prev-turn'));
bar.querySelector('.ri-pr-next').addEventListener('click', () => click('next-turn'));

function load() {
  try { P = props.value ? JSON.parse(props.value) : P; } catch (err) { P = {turn: null, marks: [], note: String(err)}; }
  sendMarks();
  if (presenting()) show();
}
if (new URLSearchParams(location.search).get('present') === '1') enter();
load();
watch('value', load);
