// Notes and decks on the page (viewer/ui/talk_panel.py). props.value is render/talk.py::talk_payload's
// JSON: the open turn's note marks (handed to the token view as its 'notes' layer), every note (n / N
// step through them while presenting) and the deck being shown (→ / ← walk its steps while presenting,
// ahead of presenter.js's turn keys). The callout box shows the step's title and note and the turn's
// notes, large, in presenter mode. Data only reaches the DOM through textContent; the server is asked
// to move with trigger('click', {note: k} | {step: k}) and checks k itself.
const box = element.querySelector('.ri-callout');
const stepEl = box.querySelector('.ri-callout-step');
const notesEl = box.querySelector('.ri-callout-notes');
let T = {turn: null, marks: [], notes: [], deck: null, seq: 0}, seen = 0, at = -1;
let want = -1, shownAt = -1;  // the step last asked for: a quick → → asks 2 then 3, not 2 twice
// Each press numbered: two presses' requests may reach the server in either order, and it answers
// only the newest (viewer/ui/staged.py, PRESSES)
let press = 0;
const presenting = () => document.body.classList.contains('ri-present');
const shownTurn = () => { const r = document.querySelector('#token-view .ri-tv'); return r ? r.dataset.turn : undefined; };

function order() {  // the notes in reading order: by turn, then first token
  return T.notes.slice().sort((a, b) => a.turn - b.turn || a.tok[0] - b.tok[0] || a.k - b.k);
}

function callout() {
  const d = T.deck;
  stepEl.textContent = d ? `step ${d.at + 1} / ${d.n}${d.title ? ' · ' + d.title : ''}${d.step ? ' · ' + d.step : ''}` +
    (d.note ? ' — ' + d.note : '') : '';
  stepEl.hidden = !d;
  const turn = shownTurn();
  const here = T.notes.filter(n => String(n.turn) === turn);
  const frag = document.createDocumentFragment();
  for (const n of here) {
    const line = document.createElement('div');
    line.className = 'ri-callout-note' + (n.k === at ? ' on' : '') + (n.flag ? ' flagged' : '');
    line.textContent = `${n.k + 1}. tokens ${n.tok[0]}–${n.tok[1]}: ${n.text}${n.flag ? ' (⚠ ' + n.flag + ')' : ''}`;
    frag.appendChild(line);
  }
  notesEl.replaceChildren(frag);
  box.hidden = !presenting() || (!d && !here.length);
  box.dataset.at = String(at);
  box.dataset.notes = String(T.notes.length);  // what n / N step through (tests wait for it)
}

// The shown turn's note marks, from every note (as render/talk.py picks T.marks: the turn's notes that are
// not flagged): a turn switch needs no server round trip for them (tests/test_room_browser.py).
let marked;
function marks() {
  const turn = shownTurn();
  if (turn === undefined || turn === marked) return;
  marked = turn;
  const list = T.notes.filter(n => String(n.turn) === turn && !n.flag).map(n => [n.tok[0], n.tok[1] + 1, n.text]);
  window.dispatchEvent(new CustomEvent('ri-marks', {detail: {target: 'token-view', layer: 'notes', turn: Number(turn), marks: list}}));
}

function load() {
  try { T = props.value ? JSON.parse(props.value) : T; } catch (err) { T = {turn: null, marks: [], notes: [], deck: null, seq: 0}; }
  marked = undefined;
  marks();
  if (T.deck && (T.deck.at !== shownAt || T.seq !== seen)) { want = T.deck.at; shownAt = T.deck.at; }
  if (T.deck && T.seq !== seen) {  // a deck was opened (a ?deck= link or an upload): present it
    seen = T.seq;
    if (!presenting()) window.dispatchEvent(new CustomEvent('ri-present'));
  }
  callout();
}

function stepNote(dir) {
  const list = order();
  if (!list.length) return;
  let i = list.findIndex(n => n.k === at);
  i = i < 0 ? (dir > 0 ? 0 : list.length - 1) : Math.max(0, Math.min(list.length - 1, i + dir));
  at = list[i].k;
  trigger('click', {note: at, press: ++press});
  callout();
}

if (!window.__riTalkKeys) {
  window.__riTalkKeys = true;
  // Capture phase on window: runs before presenter.js's document listener, so with a deck open
  // → / ← are the deck's steps, not the rollout's turns.
  window.addEventListener('keydown', e => {
    if (!presenting() || e.ctrlKey || e.metaKey || e.altKey) return;
    const t = e.target;
    if (t && (t.tagName === 'INPUT' || t.tagName === 'TEXTAREA' || t.tagName === 'SELECT' || t.isContentEditable)) return;
    if (e.key === 'n') stepNote(+1);
    else if (e.key === 'N') stepNote(-1);
    else if (T.deck && (e.key === 'ArrowRight' || e.key === 'ArrowLeft')) {
      const next = want + (e.key === 'ArrowRight' ? 1 : -1);
      if (next >= 0 && next < T.deck.n) want = next;
      trigger('click', {step: next, press: ++press});  // past either end: the server says so
    } else return;
    e.preventDefault();
    e.stopImmediatePropagation();
  }, true);
  // the callout follows the turn on screen and presenter mode coming and going
  new MutationObserver(() => { marks(); callout(); }).observe(document.body, {subtree: true, attributeFilter: ['data-turn']});
  new MutationObserver(callout).observe(document.body, {attributeFilter: ['class']});  // body only
}
load();
watch('value', load);
