// The query page's behaviour (mmir.reporting.query_pages): sort, filter, Δ of two systems, open a query's top 10.
// Data comes from the page's JSON block; every text is set with textContent (never parsed as HTML).
(function () {
  "use strict";
  const D = JSON.parse(document.getElementById("page-data").textContent);
  const table = document.getElementById("queries");
  const tbody = table.tBodies[0];
  const rows = Array.from(tbody.querySelectorAll("tr.query"));
  const nums = (s) => s.split(",").map((v) => (v === "" ? null : Number(v)));
  rows.forEach((r) => { r._scores = nums(r.dataset.scores); r._firsts = nums(r.dataset.firsts); r._delta = null; });
  const $ = (id) => document.getElementById(id);
  const el = (tag, cls, text) => { const e = document.createElement(tag); if (cls) e.className = cls; if (text != null) e.textContent = text; return e; };

  function updateDelta() {
    const a = Number($("sys-a").value), b = Number($("sys-b").value);
    $("delta-head").textContent = "Δ " + D.labels[D.systems[a]] + " − " + D.labels[D.systems[b]];
    rows.forEach((r) => {
      const x = r._scores[a], y = r._scores[b];
      r._delta = x == null || y == null ? null : x - y;
      r.querySelector("td.delta").textContent = r._delta == null ? "–" : (r._delta > 0 ? "+" : "") + r._delta.toFixed(3);
    });
  }

  function applyFilters() {
    const outcome = $("filter-outcome").value;
    const text = $("filter-text").value.trim().toLowerCase();
    const facets = Array.from(document.querySelectorAll("select[data-facet]")).map((s) => [s.dataset.facet, s.value]);
    let shown = 0;
    rows.forEach((r) => {
      let ok = facets.every(([k, v]) => !v || r.dataset[k] === v);
      if (ok && outcome) {
        const d = r._delta;
        ok = d != null && (outcome === "win" ? d > 1e-9 : outcome === "loss" ? d < -1e-9 : Math.abs(d) <= 1e-9);
      }
      if (ok && text) ok = (r.dataset.qid + " " + D.queries[r.dataset.qid].text).toLowerCase().includes(text);
      r.hidden = !ok;
      if (r._detail) r._detail.hidden = !ok;
      shown += ok ? 1 : 0;
    });
    $("shown").textContent = shown + " of " + rows.length + " queries";
  }

  function sortValue(r, key) {
    if (key === "delta") return r._delta;
    if (key.startsWith("score-")) return r._scores[Number(key.slice(6))];
    if (key.startsWith("first-")) return r._firsts[Number(key.slice(6))];
    if (key === "n_gold") return Number(r.dataset.n_gold);
    if (key === "text") return D.queries[r.dataset.qid].text;
    return r.dataset[key] || "";
  }

  table.tHead.addEventListener("click", (ev) => {
    const th = ev.target.closest("[data-key]");  // a header cell, or the r@1st inside a system's
    if (!th || th.dataset.key === "open") return;
    const key = th.dataset.key;
    const dir = th.getAttribute("aria-sort") === "descending" ? 1 : -1;  // first click: largest first
    table.tHead.querySelectorAll("[aria-sort]").forEach((h) => h.removeAttribute("aria-sort"));
    th.setAttribute("aria-sort", dir === 1 ? "ascending" : "descending");
    const text = th.dataset.type === "text";
    rows.sort((x, y) => {
      const a = sortValue(x, key), b = sortValue(y, key);
      if (a == null || b == null) return (a == null) - (b == null);  // missing values last
      return text ? dir * String(a).localeCompare(String(b)) : dir * (a - b);
    });
    rows.forEach((r) => { tbody.appendChild(r); if (r._detail) tbody.appendChild(r._detail); });
  });

  function itemNode(id) {
    const it = D.items[id] || {};
    const box = el("span", "item");
    if (it.thumb) {
      const img = el("img", "thumb");
      img.src = it.thumb;
      img.alt = it.alt || it.image || id;
      img.title = it.image || id;
      box.appendChild(img);
    }
    if (it.doc) box.appendChild(el("div", "id", it.doc));
    else box.appendChild(el("div", "id", it.image || id));
    if (it.image && D.ranks === "pairs") box.appendChild(el("div", "id", "image: " + it.image));
    if (it.text) box.appendChild(el("div", "excerpt", it.text));
    else if (it.alt) box.appendChild(el("div", "excerpt", it.alt));
    return box;
  }

  function topList(q, s) {
    const box = el("div", "top");
    box.dataset.system = s;
    const fs = D.first_stage[s];
    box.appendChild(el("h4", null, D.labels[s] + (fs ? " (reranked; input: " + D.labels[fs] + ")" : "")));
    const list = el("ol");
    const top = q.top[s] || [];
    if (!top.length) list.appendChild(el("li", null, "nothing retrieved"));
    top.forEach(([id, rel], i) => {
      const li = el("li", rel > 0 ? "relevant" : "");
      li.dataset.item = id;
      li.dataset.rel = rel;
      li.appendChild(el("span", "rank", String(i + 1)));
      li.appendChild(el("span", "mark", rel > 0 ? (D.graded ? "✓" + rel : "✓") : ""));
      li.appendChild(itemNode(id));
      if (fs) {
        const r = (q.inputs[s] || [])[i];
        li.appendChild(el("span", "input", r == null ? "input: –" : "input: #" + r));
      }
      list.appendChild(li);
    });
    box.appendChild(list);
    return box;
  }

  function toggle(r, open) {
    const btn = r.querySelector("button.open");
    if (open === undefined) open = !r._detail || r._detail.hidden;
    if (open && !r._detail) {
      const q = D.queries[r.dataset.qid];
      const tr = el("tr", "detail");
      tr.dataset.qid = r.dataset.qid;
      const td = el("td");
      td.colSpan = r.cells.length;
      td.appendChild(el("div", "fulltext", q.text));
      const tops = el("div", "tops");
      D.systems.forEach((s) => tops.appendChild(topList(q, s)));
      td.appendChild(tops);
      tr.appendChild(td);
      r.after(tr);
      r._detail = tr;
    }
    if (r._detail) r._detail.hidden = !open || r.hidden;
    btn.textContent = open ? "▾" : "▸";
    btn.setAttribute("aria-expanded", String(open));
  }

  tbody.addEventListener("click", (ev) => {
    const btn = ev.target.closest("button.open");
    if (btn) toggle(btn.closest("tr"));
  });
  ["sys-a", "sys-b"].forEach((id) => $(id).addEventListener("change", () => { updateDelta(); applyFilters(); }));
  document.querySelectorAll(".controls select, .controls input").forEach((c) => c.addEventListener("input", applyFilters));

  function openFromHash() {
    const qid = decodeURIComponent(location.hash.replace(/^#q-/, ""));
    const r = rows.find((x) => x.dataset.qid === qid);
    if (r && location.hash.startsWith("#q-")) { toggle(r, true); r.scrollIntoView(); }
  }
  window.addEventListener("hashchange", openFromHash);
  updateDelta();
  applyFilters();
  openFromHash();
})();
