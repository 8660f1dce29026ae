/* vllm-compat site: filters, permalinks and the release selector.
 * The pages are complete without this script; it only shows and hides what is there.
 * State lives in the URL fragment so any view can be linked:
 *   index.html#status=blocked&strategy=multi_node_tp_pp   (filters; values may be comma lists)
 *   index.html#cell-zai-org-glm-5.2-multi_node_tp_pp-spec_decoding-mtp   (scroll to a cell)
 *   recipes/zai-org/GLM-5.2.html#release=0.33.0&cell=cell-...           (release + cell)
 * A classic script (not a module) because module scripts do not load from file://. */
(function () {
  "use strict";
  var KEYS = ["q", "provider", "strategy", "feature", "status", "release", "cell"];

  function parseHash() {
    var raw = location.hash.replace(/^#/, "");
    var state = {};
    if (!raw) return state;
    if (raw.indexOf("=") < 0) {
      state.target = decodeURIComponent(raw);
      return state;
    }
    raw.split("&").forEach(function (pair) {
      var i = pair.indexOf("=");
      if (i < 0) return;
      var k = decodeURIComponent(pair.slice(0, i));
      var v = decodeURIComponent(pair.slice(i + 1).replace(/\+/g, " "));
      if (KEYS.indexOf(k) >= 0 && v) state[k] = v;
    });
    if (state.cell) state.target = state.cell;
    return state;
  }

  function formatHash(state) {
    var parts = [];
    KEYS.forEach(function (k) {
      if (state[k]) {
        parts.push(k + "=" + encodeURIComponent(state[k]).replace(/%2C/g, ",").replace(/%3A/gi, ":"));
      }
    });
    return parts.length ? "#" + parts.join("&") : "";
  }

  function setHash(hash) {
    var url = location.href.replace(/#.*$/, "") + hash;
    try {
      history.replaceState(null, "", url);
    } catch (e) {
      location.hash = hash; /* some file:// setups refuse replaceState */
    }
  }

  function list(value) {
    return value ? value.split(",").filter(Boolean) : [];
  }

  function highlight(els) {
    Array.prototype.forEach.call(document.querySelectorAll(".hl"), function (el) {
      el.classList.remove("hl");
    });
    els.forEach(function (el) { el.classList.add("hl"); });
    if (els.length) {
      els[0].scrollIntoView({ block: "center", inline: "center" });
      var focusable = els[0].querySelector("a") || els[0];
      if (focusable.focus) focusable.focus({ preventScroll: true });
    }
  }

  /* ------------------------------------------------------------------ index */

  function initIndex() {
    var form = document.getElementById("filters");
    var controls = Array.prototype.slice.call(form.querySelectorAll("[data-key]"));
    var groups = Array.prototype.slice.call(document.querySelectorAll("#matrix tbody.g"));
    var columns = Array.prototype.slice.call(document.querySelectorAll("#matrix [data-strategy]"));
    var entries = Array.prototype.slice.call(document.querySelectorAll("#matrix li.e"));
    var output = document.getElementById("shown");
    var permalink = form.querySelector(".permalink");

    function readControls() {
      var state = {};
      controls.forEach(function (c) {
        if (c.value.trim()) state[c.dataset.key] = c.value.trim();
      });
      return state;
    }

    function writeControls(state) {
      controls.forEach(function (c) {
        var v = state[c.dataset.key] || "";
        if (c.tagName === "SELECT" && v && !Array.prototype.some.call(c.options, function (o) { return o.value === v; })) {
          c.add(new Option(v.split(",").join(", "), v)); /* a comma list from a shared link */
        }
        c.value = v;
      });
    }

    function apply(state) {
      var strategies = list(state.strategy), statuses = list(state.status);
      var features = list(state.feature), providers = list(state.provider);
      var terms = (state.q || "").toLowerCase().split(/\s+/).filter(Boolean);
      var narrowing = statuses.length || features.length;
      columns.forEach(function (el) {
        el.hidden = strategies.length > 0 && strategies.indexOf(el.dataset.strategy) < 0;
      });
      entries.forEach(function (li) {
        var k = li.dataset.k, f = k.split(":")[0];
        li.hidden = (statuses.length > 0 && statuses.indexOf(li.dataset.s) < 0) ||
          (features.length > 0 && features.indexOf(k) < 0 && features.indexOf(f) < 0);
      });
      var shown = 0, recipes = 0;
      groups.forEach(function (g) {
        var any = false;
        Array.prototype.forEach.call(g.querySelectorAll("tr.r"), function (tr) {
          var ok = (!providers.length || providers.indexOf(tr.dataset.provider) >= 0) &&
            terms.every(function (t) { return tr.dataset.q.indexOf(t) >= 0; });
          var visible = 0;
          if (ok) {
            Array.prototype.forEach.call(tr.querySelectorAll("td"), function (td) {
              if (td.hidden) return;
              visible += td.querySelectorAll("li.e:not([hidden])").length;
            });
          }
          tr.hidden = !ok || (narrowing && visible === 0);
          if (!tr.hidden) { any = true; shown += visible; recipes += 1; }
        });
        g.hidden = !any;
      });
      output.textContent = shown + " of " + entries.length + " feature modes in " + recipes +
        (recipes === 1 ? " recipe" : " recipes");
      permalink.setAttribute("href", formatHash(state) || "#");
    }

    function fromHash() {
      var state = parseHash();
      writeControls(state);
      apply(state);
      if (state.target) {
        var el = document.getElementById(state.target);
        if (el && el.closest("[hidden]")) { /* a filter hides the cell: show everything */
          writeControls({});
          apply({});
        }
        if (el) highlight([el]);
      }
    }

    function onInput() {
      var state = readControls();
      apply(state);
      setHash(formatHash(state));
    }

    controls.forEach(function (c) {
      c.addEventListener(c.tagName === "SELECT" ? "change" : "input", onInput);
    });
    form.addEventListener("submit", function (e) { e.preventDefault(); });
    form.addEventListener("reset", function () { setTimeout(onInput, 0); });
    window.addEventListener("hashchange", fromHash);
    fromHash();
  }

  /* ------------------------------------------------------------------ recipe page */

  function initRecipe() {
    var sections = Array.prototype.slice.call(document.querySelectorAll("section.rel"));
    var links = Array.prototype.slice.call(document.querySelectorAll("nav.releases a[data-release]"));
    var fallback = document.body.dataset.default;

    function show(release) {
      sections.forEach(function (s) { s.hidden = s.dataset.release !== release; });
      links.forEach(function (a) {
        if (a.dataset.release === release) a.setAttribute("aria-current", "true");
        else a.removeAttribute("aria-current");
      });
    }

    function fromHash() {
      var state = parseHash();
      var release = fallback;
      var byId = state.target && document.getElementById(state.target);
      if (state.release && sections.some(function (s) { return s.dataset.release === state.release; })) {
        release = state.release;
      } else if (byId && !state.cell && byId.closest("section.rel")) {
        release = byId.closest("section.rel").dataset.release; /* a note or a pinned cell */
      }
      function cellsIn(rel) {
        var section = sections.filter(function (s) { return s.dataset.release === rel; })[0];
        return section ? Array.prototype.slice.call(section.querySelectorAll("[data-cell]")).filter(function (td) {
          return td.dataset.cell === state.target;
        }) : [];
      }
      var cells = state.target ? cellsIn(release) : [];
      if (state.target && !cells.length && !state.release) { /* a cell only some releases have */
        sections.some(function (s) {
          cells = cellsIn(s.dataset.release);
          if (cells.length) release = s.dataset.release;
          return cells.length > 0;
        });
      }
      show(release);
      if (!state.target) return;
      var marks = cells.slice();
      cells.forEach(function (td) {
        td.dataset.notes.split(" ").filter(Boolean).forEach(function (n) {
          var note = document.getElementById("note-" + release + "-" + n);
          if (note && marks.indexOf(note) < 0) marks.push(note);
        });
      });
      if (!cells.length && byId) marks = [byId];
      highlight(marks);
    }

    window.addEventListener("hashchange", fromHash);
    fromHash();
  }

  function init() {
    if (document.getElementById("matrix")) initIndex();
    if (document.querySelector("section.rel")) initRecipe();
    document.documentElement.setAttribute("data-ready", "1");
  }

  if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", init);
  else init();
})();
