// The token view's payload ("v": 3) read back in the browser. Its format is written down in
// docs/ARCHITECTURE.md ("The token view's payload"); viewer/render/payload.py writes it (token_payload)
// and reads it in Python (decode_payload), with the same checks as here: a payload one side refuses,
// the other does too (tests/test_token_payload_browser.py). The ids and the texts' UTF-16 lengths tl
// are number columns (riNumbers), the texts one string tx cut at those lengths, the kinds flat runs kr
// ([kind, count, ...]), the logprobs runs lr ([[start, [lp, ...]], ...], null elsewhere).
// riExpandTokens adds the per-position arrays the view reads (D.t, D.k, D.lp) and D.off (where text
// i starts in D.tx: a run of tokens is one slice), once per payload; a payload that does not add up
// throws (the view says it could not read it). Used by token_view.js and the offline export.
const RI_DIGIT = (() => {
  const t = new Int8Array(128).fill(-1), a = 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_';
  for (let i = 0; i < 64; i++) t[a.charCodeAt(i)] = i;
  return t;
})();
// A number column: each number's 5-bit groups, lowest first, as base64url characters; one from the
// upper half of the alphabet says another group follows. A list of integers is one already.
function riNumbers(s) {
  if (Array.isArray(s)) {
    if (!s.every(Number.isInteger)) throw new Error('a number column list holds something that is not an integer');
    return s;
  }
  if (typeof s !== 'string') throw new Error('a number column is neither a string nor a list');
  const out = [];
  let v = 0, scale = 1;
  for (let i = 0; i < s.length; i++) {
    const c = s.charCodeAt(i), d = c < 128 ? RI_DIGIT[c] : -1;
    if (d < 0) throw new Error('a number column holds something that is not one of its digits');
    v += (d & 31) * scale;
    if (v > Number.MAX_SAFE_INTEGER) throw new Error('a number column holds a number over 2**53 - 1');
    if (d < 32) { out.push(v); v = 0; scale = 1; } else if ((scale *= 32) > 2 ** 50) {
      throw new Error('a number column holds a number over 2**53 - 1');  // a 12th group
    }
  }
  if (scale !== 1) throw new Error('a number column ends inside a number');
  return out;
}
const RI_KINDS = new Set([0, 1, 2]);  // Kind (viewer/render/payload.py), token_view.js's KIND
function riExpandTokens(D) {
  if (D.off instanceof Int32Array) return D;  // expanded already (no JSON makes a typed array)
  if (D.v !== 3) throw new Error(`unknown token payload version ${D.v}`);
  D.ids = riNumbers(D.ids); D.tl = riNumbers(D.tl);
  const n = D.ids.length, tl = D.tl, tx = D.tx;
  if (tl.length !== n) throw new Error('texts do not match the ids');
  if (tl.some(x => x < 0)) throw new Error('a text length is negative');
  if (typeof tx !== 'string') throw new Error('tx is not a string');
  const off = new Int32Array(n + 1), t = new Array(n);
  let a = 0;
  for (let i = 0; i < n; i++) { const b = a + tl[i]; off[i] = a; t[i] = tx.slice(a, b); a = b; }
  off[n] = a;
  if (a !== tx.length) throw new Error('text lengths do not add up');
  const k = new Uint8Array(n), kr = D.kr;
  if (!Array.isArray(kr) || kr.length % 2) throw new Error('kr is not [kind, count, ...]');
  let at = 0;
  for (let r = 0; r < kr.length; r += 2) {
    const kind = kr[r], count = kr[r + 1];
    if (!RI_KINDS.has(kind) || !Number.isInteger(count) || count <= 0 || at + count > n)
      throw new Error('kinds do not cover the tokens');
    k.fill(kind, at, at + count); at += count;
  }
  if (at !== n) throw new Error('kinds do not cover the tokens');
  const lp = new Array(n).fill(null);
  if (!Array.isArray(D.lr)) throw new Error('lr is not a list of runs');
  let end = 0;
  for (const run of D.lr) {
    const ok = Array.isArray(run) && run.length === 2 && Number.isInteger(run[0]) && Array.isArray(run[1]);
    const start = ok ? run[0] : -1, vals = ok ? run[1] : [];
    if (!vals.length || start < end || start + vals.length > n || !vals.every(x => typeof x === 'number'))
      throw new Error('logprob runs are not in order inside the tokens');
    for (let j = 0; j < vals.length; j++) lp[start + j] = vals[j];
    end = start + vals.length;
  }
  D.t = t; D.k = k; D.lp = lp; D.off = off;
  return D;
}
