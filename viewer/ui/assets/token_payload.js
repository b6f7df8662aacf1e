// The token view's payload (viewer/render/tokens.py::token_payload, "v": 3) carries its per-position
// columns compact: the ids and the texts' UTF-16 lengths tl as number column strings (riNumbers), the
// texts as one string tx cut at those lengths, the kinds as flat runs kr
// ([kind, count, ...]), the logprobs as runs lr ([[start, [lp, ...]], ...], null elsewhere): a
// 6k-token prompt is thousands of 0s and nulls otherwise, read again by every visitor and API client.
// riExpandTokens adds the per-position arrays the view reads (D.t, D.k, D.lp) and D.off (where text
// i starts in D.tx: a run of tokens is one slice), once per payload; a payload that does not add up
// throws (the view says it could not read it). Used by token_view.js and the offline export.
const RI_DIGIT = (() => {
  const t = new Int8Array(128).fill(-1), a = 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_';
  for (let i = 0; i < 64; i++) t[a.charCodeAt(i)] = i;
  return t;
})();
// A number column (viewer/render/tokens.py::_varints): each number's 5-bit groups, lowest first, as
// base64url characters; one from the upper half of the alphabet says another group follows. A list
// (ids that could not be written so) is taken as it is.
function riNumbers(s) {
  if (Array.isArray(s)) return s;
  if (typeof s !== 'string') throw new Error('a number column is neither a string nor a list');
  const out = [];
  let v = 0, scale = 1;
  for (let i = 0; i < s.length; i++) {
    const c = s.charCodeAt(i), d = c < 128 ? RI_DIGIT[c] : -1;
    if (d < 0 || scale > 2 ** 40) throw new Error('a number column holds something that is not a number');
    v += (d & 31) * scale;
    if (d < 32) { out.push(v); v = 0; scale = 1; } else scale *= 32;
  }
  if (scale !== 1) throw new Error('a number column ends inside a number');
  return out;
}
function riExpandTokens(D) {
  if (D.t) return D;  // already expanded
  if (D.v !== 3) throw new Error(`unknown token payload version ${D.v}`);
  D.ids = riNumbers(D.ids); D.tl = riNumbers(D.tl);
  const n = D.ids.length, tl = D.tl, tx = D.tx;
  if (!Array.isArray(tl) || tl.length !== n || typeof tx !== 'string') throw new Error('texts do not match the ids');
  const off = new Int32Array(n + 1), t = new Array(n);
  let a = 0;
  for (let i = 0; i < n; i++) { const b = a + tl[i]; off[i] = a; t[i] = tx.slice(a, b); a = b; }
  off[n] = a;
  if (a !== tx.length) throw new Error('text lengths do not add up');
  const k = new Uint8Array(n);
  let at = 0;
  for (let r = 0; r + 1 < D.kr.length; r += 2) { k.fill(D.kr[r], at, at + D.kr[r + 1]); at += D.kr[r + 1]; }
  if (at !== n) throw new Error('kinds do not cover the tokens');
  const lp = new Array(n).fill(null);
  for (const [start, vals] of D.lr) for (let j = 0; j < vals.length && start + j < n; j++) lp[start + j] = vals[j];
  D.t = t; D.k = k; D.lp = lp; D.off = off;
  return D;
}
